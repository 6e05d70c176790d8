def f(values):  # << START_OF_TRACE
    log = []
    for v in values:
        try:
            if v == 0:
                raise KeyError(v)
            log.append(10 // v)
        except KeyError as err:
            log.append(repr(err))
        finally:
            log.append("end")
    return log

f([5, 0])
