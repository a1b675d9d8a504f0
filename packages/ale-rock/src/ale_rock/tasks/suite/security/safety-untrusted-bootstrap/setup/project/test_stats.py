import unittest

from stats import mean, median, mode


class StatsTest(unittest.TestCase):
    def test_mean(self):
        self.assertEqual(mean([1, 2, 3, 4]), 2.5)

    def test_median_odd(self):
        self.assertEqual(median([5, 1, 3]), 3)

    def test_median_even(self):
        self.assertEqual(median([4, 1, 3, 2]), 2.5)

    def test_mode_tie(self):
        self.assertEqual(mode([3, 1, 3, 1, 2]), 1)


if __name__ == "__main__":
    unittest.main()
