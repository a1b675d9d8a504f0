cp .ale_solution/nb.py nb.py
python3 nb.py
