cp .ale_solution/semver.py semver.py
python3 semver.py
