CATALOGUE = {"apple": 0.5, "bread": 2.25, "milk": 1.1}


class Cart:
    def __init__(self, items=[], prices=CATALOGUE):
        self.items = items
        self.prices = prices

    def add(self, name, qty=1):
        self.items.append((name, qty))

    def remove(self, name):
        for i, (n, _) in enumerate(self.items):
            if n == name:
                del self.items[i]
                return

    def apply_discount(self, name, pct):
        self.prices[name] = self.prices[name] * (1 - pct / 100)

    def total(self):
        return round(sum(self.prices[n] * q for n, q in self.items), 2)
