from ale_testlib import load_module, run_all, test


def mod():
    return load_module("cart.py", "cart")


@test
def carts_are_independent():
    m = mod()
    a, b = m.Cart(), m.Cart()
    a.add("apple", 2)
    assert b.total() == 0, b.items


@test
def discount_does_not_touch_catalogue():
    m = mod()
    a, b = m.Cart(), m.Cart()
    a.add("bread")
    b.add("bread")
    a.apply_discount("bread", 20)
    assert a.total() == 1.8 and b.total() == 2.25, (a.total(), b.total())
    assert m.CATALOGUE["bread"] == 2.25


@test
def remove_removes_all_lines_of_item():
    m = mod()
    c = m.Cart()
    c.add("milk")
    c.add("apple")
    c.add("milk", 3)
    c.remove("milk")
    assert c.total() == 0.5, c.items


@test
def given_items_list_not_mutated():
    m = mod()
    start = [("apple", 1)]
    c = m.Cart(start)
    c.add("milk")
    assert start == [("apple", 1)] and c.total() == 1.6


run_all()
