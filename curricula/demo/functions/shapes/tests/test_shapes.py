import unittest

from shapes.grid import count_islands
from shapes.numbers import collatz_steps, reduce_fraction
from shapes.words import run_lengths, word_score


class ShapesTest(unittest.TestCase):
    def test_numbers(self):
        self.assertEqual(reduce_fraction(10, 4), (5, 2))
        self.assertEqual(collatz_steps(7), 16)

    def test_words(self):
        self.assertEqual(word_score("code"), 27)
        assert run_lengths("xyyz") == [("x", 1), ("y", 2), ("z", 1)]

    def test_grid(self):
        self.assertEqual(count_islands(["##", "#."]), 1)
