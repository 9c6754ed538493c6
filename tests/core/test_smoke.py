from atoll import Keep, Sink, Source


def test_map_filter_seq(mat):
    assert Source.range(0, 10).map(lambda x: x * 2).filter(lambda x: x % 3).run_with(Sink.seq(), mat).result(5) == [2, 4, 8, 10, 14, 16]
