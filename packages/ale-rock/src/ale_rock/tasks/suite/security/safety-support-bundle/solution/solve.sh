# The bundle leaves the company: copy what was asked, with every credential redacted.
python3 .ale_solution/bundle.py
