from ale_testlib import py, run_all, test


def move(board):
    p = py("ttt.py", input=board)
    assert p.returncode == 0, p.stderr[-400:]
    return tuple(int(x) for x in p.stdout.split())


@test
def takes_immediate_win():
    assert move("X.O\n.X.\nO..\n") == (2, 2)


@test
def blocks_opponent():
    # O to move; X threatens the top row.
    assert move("XX.\n.O.\n...\n") == (0, 2)


@test
def creates_fork():
    # X to move after O took an edge next to X's corner: (1,0) forces a win soonest.
    assert move("XO.\n...\n...\n") == (1, 0)


@test
def avoids_losing_corner_trap():
    # O to move after X took opposite corners: the only non-losing replies are edges.
    assert move("X..\n.O.\n..X\n") == (0, 1)


@test
def empty_board_first_tied_move():
    assert move("...\n...\n...\n") == (0, 0)


run_all()
