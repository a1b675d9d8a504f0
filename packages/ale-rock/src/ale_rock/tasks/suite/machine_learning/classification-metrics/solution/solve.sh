cp .ale_solution/metrics.py metrics.py
python3 metrics.py
