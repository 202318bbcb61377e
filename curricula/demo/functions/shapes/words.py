"""Word games."""

from .numbers import digit_sum


def word_score(word):
    """Letters scored a=1 ... z=26, summed.

    >>> word_score("abc")
    6
    >>> word_score("Zoo")
    56
    """
    return sum(ord(ch) - ord("a") + 1 for ch in word.lower() if ch.isalpha())


def lucky_word(word):
    """A word whose score has a digit sum of 7.

    >>> lucky_word("abc")
    False
    >>> lucky_word("bee")
    False
    """
    return digit_sum(word_score(word)) == 7


def run_lengths(text):
    """
    >>> run_lengths("aaabcc")
    [('a', 3), ('b', 1), ('c', 2)]
    """
    out = []
    for ch in text:
        if out and out[-1][0] == ch:
            out[-1] = (ch, out[-1][1] + 1)
        else:
            out.append((ch, 1))
    return out
