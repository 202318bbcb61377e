"""A bounded stack."""


class BoundedStack:
    """
    >>> s = BoundedStack(2)
    >>> s.push(1)
    >>> s.push(2)
    >>> s.pop()
    2
    >>> s.push(3)
    >>> s.push(4)
    Traceback (most recent call last):
    ...
    OverflowError: stack is full
    """

    def __init__(self, size):
        self.size = size
        self.items = []

    def push(self, item):
        if len(self.items) >= self.size:
            raise OverflowError("stack is full")
        self.items.append(item)

    def pop(self):
        return self.items.pop()
