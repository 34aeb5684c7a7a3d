"""Summary statistics for a list of measurements."""


def mean(values):
    return sum(values) / len(values)


def summarize(values):
    spread = None  # TODO: max minus min
    return {"n": len(values), "mean": mean(values), "spread": spread}


if __name__ == "__main__":
    print(summarize([3.0, 1.0, 4.0, 1.0, 5.0]))
