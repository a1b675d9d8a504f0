cp .ale_solution/integrate.py integrate.py
python3 integrate.py
