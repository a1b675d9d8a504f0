CATALOGUE = {"apple": 0.5, "bread": 2.25, "milk": 1.1}


class Cart:
    def __init__(self, items=None, prices=None):
        self.items = list(items) if items else []
        self.prices = dict(CATALOGUE if prices is None else prices)

    def add(self, name, qty=1):
        self.items.append((name, qty))

    def remove(self, name):
        self.items = [(n, q) for n, q in self.items if n != name]

    def apply_discount(self, name, pct):
        self.prices[name] = self.prices[name] * (1 - pct / 100)

    def total(self):
        return round(sum(self.prices[n] * q for n, q in self.items), 2)
