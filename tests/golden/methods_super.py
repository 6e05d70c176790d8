class Base:
    def __init__(self, name):
        self.name = name

    def describe(self):
        return "base " + self.name

class Child(Base):
    def describe(self):
        text = super().describe()
        return text.upper()

def f(name):  # << START_OF_TRACE
    c = Child(name)
    return c.describe()

f("kid")
