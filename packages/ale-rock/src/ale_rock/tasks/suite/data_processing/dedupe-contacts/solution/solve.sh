cp .ale_solution/dedupe.py dedupe.py
python3 dedupe.py contacts.csv contacts_clean.csv
