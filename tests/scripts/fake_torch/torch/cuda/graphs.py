import contextlib


class CUDAGraph:
    def capture_begin(self, pool=None, capture_error_mode="global"):
        self.capturing = True

    def capture_end(self):
        self.capturing = False


@contextlib.contextmanager
def graph(cuda_graph, pool=None, stream=None, capture_error_mode="global"):
    cuda_graph.capture_begin(pool=pool, capture_error_mode=capture_error_mode)
    try:
        yield
    finally:
        cuda_graph.capture_end()
