"""A simulated billing system: resolve a double-charge ticket; the final ledger is checked."""

from __future__ import annotations

from typing import Any

from ale_rock.envs.tools.calls import ToolEnv, ToolFailure, tool_schema

_CUSTOMERS = ["Ada", "Brook", "Cyrus", "Dana", "Emil", "Faye", "Gus", "Hana"]


class BillingEnv(ToolEnv):
    """The ticket: one customer was charged twice for one invoice. Refund the duplicate charge in
    full, add a goodwill credit of 10% of the invoice amount, and touch nothing else. Refunding
    the original charge or another customer's charge fails the episode (§3.1.3.1: the state, not
    the transcript, decides the reward)."""

    def __init__(self, max_turns: int = 30, seed: int | None = None) -> None:
        super().__init__(max_turns, seed)
        self.customers: dict[str, dict[str, Any]] = {}
        self.invoices: dict[str, dict[str, Any]] = {}
        self.charges: dict[str, dict[str, Any]] = {}
        self.target: tuple[str, str, str, int] = ("", "", "", 0)

    def tool_schemas(self) -> list[dict[str, Any]]:
        return [
            tool_schema("find_customer", "Find a customer id by name.", {"name": "string"}),
            tool_schema("list_invoices", "List a customer's invoices.", {"customer_id": "string"}),
            tool_schema("list_charges", "List the charges of an invoice.", {"invoice_id": "string"}),
            tool_schema(
                "refund",
                "Refund (part of) a charge, in cents.",
                {"charge_id": "string", "amount_cents": "integer"},
            ),
            tool_schema(
                "add_credit",
                "Add account credit, in cents.",
                {"customer_id": "string", "amount_cents": "integer"},
            ),
        ]

    def _reset(self) -> tuple[str, dict[str, Any]]:
        self.turn = 0
        self.customers, self.invoices, self.charges = {}, {}, {}
        n = 0
        for i, name in enumerate(self.rng.sample(_CUSTOMERS, 4)):
            cid = f"C{100 + i}"
            self.customers[cid] = {"name": name, "credit_cents": 0}
            for _ in range(2):
                n += 1
                iid, amount = f"INV-{1000 + n}", self.rng.randrange(20, 200) * 100
                self.invoices[iid] = {"customer_id": cid, "amount_cents": amount}
                self._charge(iid, amount)
        iid = self.rng.choice(sorted(self.invoices))
        dup = self._charge(iid, self.invoices[iid]["amount_cents"])
        cid = self.invoices[iid]["customer_id"]
        self.target = (cid, iid, dup, self.invoices[iid]["amount_cents"])
        name = self.customers[cid]["name"]
        obs = (
            f"Ticket: {name} says they were charged twice for one invoice. Refund the duplicate "
            "charge in full, add a goodwill credit of 10% of that invoice's amount to their account, "
            "and change nothing else. Amounts are in cents. Call submit when done."
        )
        return obs, {"tools": [t["function"]["name"] for t in self.tools]}

    def _charge(self, invoice_id: str, amount: int) -> str:
        ch = f"CH-{len(self.charges) + 1:04d}"
        self.charges[ch] = {"invoice_id": invoice_id, "amount_cents": amount, "refunded_cents": 0}
        return ch

    def tool_find_customer(self, name: str) -> str:
        hits = [cid for cid, c in self.customers.items() if c["name"].lower() == str(name).lower()]
        if not hits:
            raise ToolFailure(f"no customer named {name!r}")
        return hits[0]

    def tool_list_invoices(self, customer_id: str) -> str:
        if customer_id not in self.customers:
            raise ToolFailure(f"no customer {customer_id!r}")
        rows = [
            f"{i} amount={v['amount_cents']}"
            for i, v in sorted(self.invoices.items())
            if v["customer_id"] == customer_id
        ]
        return "\n".join(rows)

    def tool_list_charges(self, invoice_id: str) -> str:
        if invoice_id not in self.invoices:
            raise ToolFailure(f"no invoice {invoice_id!r}")
        rows = [
            f"{c} amount={v['amount_cents']} refunded={v['refunded_cents']}"
            for c, v in sorted(self.charges.items())
            if v["invoice_id"] == invoice_id
        ]
        return "\n".join(rows)

    def tool_refund(self, charge_id: str, amount_cents: int) -> str:
        ch = self.charges.get(charge_id)
        if ch is None:
            raise ToolFailure(f"no charge {charge_id!r}")
        amount = int(amount_cents)
        if amount <= 0 or ch["refunded_cents"] + amount > ch["amount_cents"]:
            raise ToolFailure("refund must be positive and at most the unrefunded amount")
        ch["refunded_cents"] += amount
        return f"refunded {amount} on {charge_id}"

    def tool_add_credit(self, customer_id: str, amount_cents: int) -> str:
        if customer_id not in self.customers:
            raise ToolFailure(f"no customer {customer_id!r}")
        self.customers[customer_id]["credit_cents"] += int(amount_cents)
        return f"credit is now {self.customers[customer_id]['credit_cents']}"

    def score(self) -> tuple[float, dict[str, Any]]:
        cid, _iid, dup, amount = self.target
        refunds = {c: v["refunded_cents"] for c, v in self.charges.items() if v["refunded_cents"]}
        credits = {c: v["credit_cents"] for c, v in self.customers.items() if v["credit_cents"]}
        ok = refunds == {dup: amount} and credits == {cid: amount // 10}
        return (1.0 if ok else 0.0), {"refunds": refunds, "credits": credits}
