class Plain:
    def __init__(self, v):
        self.v = v

class Point:
    def __init__(self, x, y):
        self.x = x
        self.y = y

    def __repr__(self):
        return f"Point({self.x}, {self.y})"

    def shifted(self, dx):
        return Point(self.x + dx, self.y)

def f():  # << START_OF_TRACE
    p = Point(1, 2)
    q = p.shifted(3)
    box = [Plain(0)]
    return q, box

f()
