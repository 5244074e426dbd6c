def area(shape, w, h=None):
    """Area of a rectangle or a square."""
    if h is None:
        h = w
    return w * h if shape == "rect" else w * w
