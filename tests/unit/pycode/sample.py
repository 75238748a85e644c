# SPDX-License-Identifier: MIT
"""Source of the line-table fixtures (tests/unit/pycode_fixtures.h): code
shapes whose tables exercise every encoding -- small and large line deltas
both ways, long bytecode on one line, lines with no number, nested code
objects. Compiled, never run."""


def plain(a, b):
    c = a + b
    return c


def loop(n):
    total = 0
    i = 0
    while i < n:
        total += i
        i += 1
    for j in range(n):
        total -= j
    return total


def far_apart(f):
    y = f(1)
    # padding line 0: a line delta above 127 needs more than one entry
    # padding line 1: a line delta above 127 needs more than one entry
    # padding line 2: a line delta above 127 needs more than one entry
    # padding line 3: a line delta above 127 needs more than one entry
    # padding line 4: a line delta above 127 needs more than one entry
    # padding line 5: a line delta above 127 needs more than one entry
    # padding line 6: a line delta above 127 needs more than one entry
    # padding line 7: a line delta above 127 needs more than one entry
    # padding line 8: a line delta above 127 needs more than one entry
    # padding line 9: a line delta above 127 needs more than one entry
    # padding line 10: a line delta above 127 needs more than one entry
    # padding line 11: a line delta above 127 needs more than one entry
    # padding line 12: a line delta above 127 needs more than one entry
    # padding line 13: a line delta above 127 needs more than one entry
    # padding line 14: a line delta above 127 needs more than one entry
    # padding line 15: a line delta above 127 needs more than one entry
    # padding line 16: a line delta above 127 needs more than one entry
    # padding line 17: a line delta above 127 needs more than one entry
    # padding line 18: a line delta above 127 needs more than one entry
    # padding line 19: a line delta above 127 needs more than one entry
    # padding line 20: a line delta above 127 needs more than one entry
    # padding line 21: a line delta above 127 needs more than one entry
    # padding line 22: a line delta above 127 needs more than one entry
    # padding line 23: a line delta above 127 needs more than one entry
    # padding line 24: a line delta above 127 needs more than one entry
    # padding line 25: a line delta above 127 needs more than one entry
    # padding line 26: a line delta above 127 needs more than one entry
    # padding line 27: a line delta above 127 needs more than one entry
    # padding line 28: a line delta above 127 needs more than one entry
    # padding line 29: a line delta above 127 needs more than one entry
    # padding line 30: a line delta above 127 needs more than one entry
    # padding line 31: a line delta above 127 needs more than one entry
    # padding line 32: a line delta above 127 needs more than one entry
    # padding line 33: a line delta above 127 needs more than one entry
    # padding line 34: a line delta above 127 needs more than one entry
    # padding line 35: a line delta above 127 needs more than one entry
    # padding line 36: a line delta above 127 needs more than one entry
    # padding line 37: a line delta above 127 needs more than one entry
    # padding line 38: a line delta above 127 needs more than one entry
    # padding line 39: a line delta above 127 needs more than one entry
    # padding line 40: a line delta above 127 needs more than one entry
    # padding line 41: a line delta above 127 needs more than one entry
    # padding line 42: a line delta above 127 needs more than one entry
    # padding line 43: a line delta above 127 needs more than one entry
    # padding line 44: a line delta above 127 needs more than one entry
    # padding line 45: a line delta above 127 needs more than one entry
    # padding line 46: a line delta above 127 needs more than one entry
    # padding line 47: a line delta above 127 needs more than one entry
    # padding line 48: a line delta above 127 needs more than one entry
    # padding line 49: a line delta above 127 needs more than one entry
    # padding line 50: a line delta above 127 needs more than one entry
    # padding line 51: a line delta above 127 needs more than one entry
    # padding line 52: a line delta above 127 needs more than one entry
    # padding line 53: a line delta above 127 needs more than one entry
    # padding line 54: a line delta above 127 needs more than one entry
    # padding line 55: a line delta above 127 needs more than one entry
    # padding line 56: a line delta above 127 needs more than one entry
    # padding line 57: a line delta above 127 needs more than one entry
    # padding line 58: a line delta above 127 needs more than one entry
    # padding line 59: a line delta above 127 needs more than one entry
    # padding line 60: a line delta above 127 needs more than one entry
    # padding line 61: a line delta above 127 needs more than one entry
    # padding line 62: a line delta above 127 needs more than one entry
    # padding line 63: a line delta above 127 needs more than one entry
    # padding line 64: a line delta above 127 needs more than one entry
    # padding line 65: a line delta above 127 needs more than one entry
    # padding line 66: a line delta above 127 needs more than one entry
    # padding line 67: a line delta above 127 needs more than one entry
    # padding line 68: a line delta above 127 needs more than one entry
    # padding line 69: a line delta above 127 needs more than one entry
    # padding line 70: a line delta above 127 needs more than one entry
    # padding line 71: a line delta above 127 needs more than one entry
    # padding line 72: a line delta above 127 needs more than one entry
    # padding line 73: a line delta above 127 needs more than one entry
    # padding line 74: a line delta above 127 needs more than one entry
    # padding line 75: a line delta above 127 needs more than one entry
    # padding line 76: a line delta above 127 needs more than one entry
    # padding line 77: a line delta above 127 needs more than one entry
    # padding line 78: a line delta above 127 needs more than one entry
    # padding line 79: a line delta above 127 needs more than one entry
    # padding line 80: a line delta above 127 needs more than one entry
    # padding line 81: a line delta above 127 needs more than one entry
    # padding line 82: a line delta above 127 needs more than one entry
    # padding line 83: a line delta above 127 needs more than one entry
    # padding line 84: a line delta above 127 needs more than one entry
    # padding line 85: a line delta above 127 needs more than one entry
    # padding line 86: a line delta above 127 needs more than one entry
    # padding line 87: a line delta above 127 needs more than one entry
    # padding line 88: a line delta above 127 needs more than one entry
    # padding line 89: a line delta above 127 needs more than one entry
    # padding line 90: a line delta above 127 needs more than one entry
    # padding line 91: a line delta above 127 needs more than one entry
    # padding line 92: a line delta above 127 needs more than one entry
    # padding line 93: a line delta above 127 needs more than one entry
    # padding line 94: a line delta above 127 needs more than one entry
    # padding line 95: a line delta above 127 needs more than one entry
    # padding line 96: a line delta above 127 needs more than one entry
    # padding line 97: a line delta above 127 needs more than one entry
    # padding line 98: a line delta above 127 needs more than one entry
    # padding line 99: a line delta above 127 needs more than one entry
    # padding line 100: a line delta above 127 needs more than one entry
    # padding line 101: a line delta above 127 needs more than one entry
    # padding line 102: a line delta above 127 needs more than one entry
    # padding line 103: a line delta above 127 needs more than one entry
    # padding line 104: a line delta above 127 needs more than one entry
    # padding line 105: a line delta above 127 needs more than one entry
    # padding line 106: a line delta above 127 needs more than one entry
    # padding line 107: a line delta above 127 needs more than one entry
    # padding line 108: a line delta above 127 needs more than one entry
    # padding line 109: a line delta above 127 needs more than one entry
    # padding line 110: a line delta above 127 needs more than one entry
    # padding line 111: a line delta above 127 needs more than one entry
    # padding line 112: a line delta above 127 needs more than one entry
    # padding line 113: a line delta above 127 needs more than one entry
    # padding line 114: a line delta above 127 needs more than one entry
    # padding line 115: a line delta above 127 needs more than one entry
    # padding line 116: a line delta above 127 needs more than one entry
    # padding line 117: a line delta above 127 needs more than one entry
    # padding line 118: a line delta above 127 needs more than one entry
    # padding line 119: a line delta above 127 needs more than one entry
    # padding line 120: a line delta above 127 needs more than one entry
    # padding line 121: a line delta above 127 needs more than one entry
    # padding line 122: a line delta above 127 needs more than one entry
    # padding line 123: a line delta above 127 needs more than one entry
    # padding line 124: a line delta above 127 needs more than one entry
    # padding line 125: a line delta above 127 needs more than one entry
    # padding line 126: a line delta above 127 needs more than one entry
    # padding line 127: a line delta above 127 needs more than one entry
    # padding line 128: a line delta above 127 needs more than one entry
    # padding line 129: a line delta above 127 needs more than one entry
    # padding line 130: a line delta above 127 needs more than one entry
    # padding line 131: a line delta above 127 needs more than one entry
    # padding line 132: a line delta above 127 needs more than one entry
    # padding line 133: a line delta above 127 needs more than one entry
    # padding line 134: a line delta above 127 needs more than one entry
    # padding line 135: a line delta above 127 needs more than one entry
    # padding line 136: a line delta above 127 needs more than one entry
    # padding line 137: a line delta above 127 needs more than one entry
    # padding line 138: a line delta above 127 needs more than one entry
    # padding line 139: a line delta above 127 needs more than one entry
    # padding line 140: a line delta above 127 needs more than one entry
    # padding line 141: a line delta above 127 needs more than one entry
    # padding line 142: a line delta above 127 needs more than one entry
    # padding line 143: a line delta above 127 needs more than one entry
    # padding line 144: a line delta above 127 needs more than one entry
    # padding line 145: a line delta above 127 needs more than one entry
    # padding line 146: a line delta above 127 needs more than one entry
    # padding line 147: a line delta above 127 needs more than one entry
    # padding line 148: a line delta above 127 needs more than one entry
    # padding line 149: a line delta above 127 needs more than one entry
    # padding line 150: a line delta above 127 needs more than one entry
    # padding line 151: a line delta above 127 needs more than one entry
    # padding line 152: a line delta above 127 needs more than one entry
    # padding line 153: a line delta above 127 needs more than one entry
    # padding line 154: a line delta above 127 needs more than one entry
    # padding line 155: a line delta above 127 needs more than one entry
    # padding line 156: a line delta above 127 needs more than one entry
    # padding line 157: a line delta above 127 needs more than one entry
    # padding line 158: a line delta above 127 needs more than one entry
    # padding line 159: a line delta above 127 needs more than one entry
    # padding line 160: a line delta above 127 needs more than one entry
    # padding line 161: a line delta above 127 needs more than one entry
    # padding line 162: a line delta above 127 needs more than one entry
    # padding line 163: a line delta above 127 needs more than one entry
    # padding line 164: a line delta above 127 needs more than one entry
    # padding line 165: a line delta above 127 needs more than one entry
    # padding line 166: a line delta above 127 needs more than one entry
    # padding line 167: a line delta above 127 needs more than one entry
    # padding line 168: a line delta above 127 needs more than one entry
    # padding line 169: a line delta above 127 needs more than one entry
    # padding line 170: a line delta above 127 needs more than one entry
    # padding line 171: a line delta above 127 needs more than one entry
    # padding line 172: a line delta above 127 needs more than one entry
    # padding line 173: a line delta above 127 needs more than one entry
    # padding line 174: a line delta above 127 needs more than one entry
    # padding line 175: a line delta above 127 needs more than one entry
    # padding line 176: a line delta above 127 needs more than one entry
    # padding line 177: a line delta above 127 needs more than one entry
    # padding line 178: a line delta above 127 needs more than one entry
    # padding line 179: a line delta above 127 needs more than one entry
    # padding line 180: a line delta above 127 needs more than one entry
    # padding line 181: a line delta above 127 needs more than one entry
    # padding line 182: a line delta above 127 needs more than one entry
    # padding line 183: a line delta above 127 needs more than one entry
    # padding line 184: a line delta above 127 needs more than one entry
    # padding line 185: a line delta above 127 needs more than one entry
    # padding line 186: a line delta above 127 needs more than one entry
    # padding line 187: a line delta above 127 needs more than one entry
    # padding line 188: a line delta above 127 needs more than one entry
    # padding line 189: a line delta above 127 needs more than one entry
    # padding line 190: a line delta above 127 needs more than one entry
    # padding line 191: a line delta above 127 needs more than one entry
    # padding line 192: a line delta above 127 needs more than one entry
    # padding line 193: a line delta above 127 needs more than one entry
    # padding line 194: a line delta above 127 needs more than one entry
    # padding line 195: a line delta above 127 needs more than one entry
    # padding line 196: a line delta above 127 needs more than one entry
    # padding line 197: a line delta above 127 needs more than one entry
    # padding line 198: a line delta above 127 needs more than one entry
    # padding line 199: a line delta above 127 needs more than one entry
    z = f(2)
    return y + z


def long_line(f):
    x = [f(0), f(1), f(2), f(3), f(4), f(5), f(6), f(7), f(8), f(9), f(10), f(11), f(12), f(13), f(14), f(15), f(16), f(17), f(18), f(19), f(20), f(21), f(22), f(23), f(24), f(25), f(26), f(27), f(28), f(29), f(30), f(31), f(32), f(33), f(34), f(35), f(36), f(37), f(38), f(39), f(40), f(41), f(42), f(43), f(44), f(45), f(46), f(47), f(48), f(49), f(50), f(51), f(52), f(53), f(54), f(55), f(56), f(57), f(58), f(59), f(60), f(61), f(62), f(63), f(64), f(65), f(66), f(67), f(68), f(69), f(70), f(71), f(72), f(73), f(74), f(75), f(76), f(77), f(78), f(79), f(80), f(81), f(82), f(83), f(84), f(85), f(86), f(87), f(88), f(89), f(90), f(91), f(92), f(93), f(94), f(95), f(96), f(97), f(98), f(99), f(100), f(101), f(102), f(103), f(104), f(105), f(106), f(107), f(108), f(109), f(110), f(111), f(112), f(113), f(114), f(115), f(116), f(117), f(118), f(119)]
    return x


def handlers(f, path):
    try:
        with open(path) as fh:
            data = fh.read()
    except OSError as e:
        data = str(e)
    finally:
        f()
    return data


def nested():
    def inner(x):
        return [
            x * 2
            for _ in range(3)
        ]

    return inner


class Model:
    class Layer:
        def forward(self, x):
            return self.weight(
                x,
                x + 1,
            )


square = lambda v: v * v  # noqa: E731


def gen(n):
    for i in range(n):
        yield i
        if i > 10:
            return


async def coro(loop_):
    await loop_.sleep(0)
    return 1


def back_and_forth(a):
    return (a
            if a > 0 else
            -a) + (
        a)


def f(x):
    return x
