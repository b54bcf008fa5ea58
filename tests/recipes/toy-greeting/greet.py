def greet(self) -> str:
    return f"{self.greeting}, {self.name}"
