"""The Python module lingen as installed (PYTHONPATH into a DESTDIR), checked against the `lingen`
command: its images (--outdir's PNG tiles, read with PIL), its bits/dim (--json) and its model
info (--json); and its handling of bad input: an exception, never a crash.

Environment: LINGEN (the command), LINGEN_TEST_MODEL (an MNIST model's path; default the shipped
models/mnist.bin), LINGEN_TEST_IMAGES (test images scored, default 100), LINGEN_DATA (the MNIST
test set), LINGEN_TEST_INSTALLED (the folder the module must come from, when set).
"""
import gzip
import json
import os
import signal
import subprocess
import tempfile
import threading
import time
import unittest

import numpy as np
from PIL import Image

import lingen

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CLI = os.environ.get("LINGEN", os.path.join(REPO, "lingen"))
MODEL = os.environ.get("LINGEN_TEST_MODEL", os.path.join(REPO, "models", "mnist.bin"))
N_IMAGES = int(os.environ.get("LINGEN_TEST_IMAGES", "100"))
DATA = os.environ.get("LINGEN_DATA", os.path.join(REPO, "data"))


def cli(*args):
    """Run the command; its standard output."""
    return subprocess.run([CLI] + list(args), check=True, capture_output=True, text=True).stdout


def cli_json(tmp, *args):
    path = os.path.join(tmp, "out.json")
    cli(*args, "--json", path)
    with open(path) as f:
        return json.load(f)


def mnist_test(n):
    """The first n MNIST test images (n, 28, 28), read here from the IDX file."""
    with gzip.open(os.path.join(DATA, "mnist", "t10k-images-idx3-ubyte.gz"), "rb") as f:
        raw = f.read(16 + n * 784)
    assert raw[2:4] == b"\x08\x03", "not an IDX file of unsigned bytes in 3 dimensions"
    return np.frombuffer(raw, dtype=np.uint8, offset=16).reshape(n, 28, 28)


class Module(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.m = lingen.Model(MODEL)
        cls.tmp = tempfile.TemporaryDirectory()

    @classmethod
    def tearDownClass(cls):
        cls.m.close()
        cls.tmp.cleanup()

    def test_installed_module_and_version(self):
        where = os.environ.get("LINGEN_TEST_INSTALLED")
        if where:
            self.assertTrue(os.path.abspath(lingen.__file__).startswith(os.path.abspath(where)), lingen.__file__)
            with open("/proc/self/maps") as f:
                mapped = {line.split()[-1] for line in f if "liblingen.so" in line}
            self.assertTrue(mapped and all(p.startswith(os.path.abspath(where)) for p in mapped), mapped)
        self.assertEqual("lingen " + lingen.version(), cli("--version").splitlines()[0])

    def test_info_equals_lingen_info(self):
        want = cli_json(self.tmp.name, "info", "-m", MODEL)
        info = self.m.info
        for key, cli_key in [("height", "height"), ("width", "width"), ("channels", "channels"), ("seq_len", "seq_len"),
                             ("layers", "layers"), ("heads", "n_heads"), ("d_model", "d"), ("d_ff", "d_ff"),
                             ("mixtures", "n_mix"), ("parameters", "parameters"), ("attention", "attention"),
                             ("dataset", "dataset"), ("metadata", "metadata")]:
            self.assertEqual(info[key], want[cli_key], key)
        self.assertEqual(self.m.shape, (28, 28, 1))
        self.assertEqual(info["path"], MODEL)

    def test_sample_shape_and_dtype(self):
        x = self.m.sample(3, seed=2)
        self.assertEqual((x.shape, x.dtype), ((3, 28, 28, 1), np.uint8))
        self.assertEqual(self.m.sample(0).shape, (0, 28, 28, 1))

    def test_sample_equals_lingen_sample(self):
        out = os.path.join(self.tmp.name, "tiles")
        cli("sample", "-m", MODEL, "-n", "4", "-s", "5", "-o", os.path.join(self.tmp.name, "g.png"), "--outdir", out)
        tiles = np.stack([np.asarray(Image.open(os.path.join(out, "sample_%05d.png" % k))) for k in range(4)])
        got = self.m.sample(4, seed=5)
        self.assertTrue(np.array_equal(got[..., 0], tiles), "the images differ from lingen sample's tiles")

    def test_sample_first_is_the_jobs_image(self):
        whole = self.m.sample(4, seed=5, batch=2)
        self.assertTrue(np.array_equal(self.m.sample(2, seed=5, first=2, batch=2), whole[2:]))

    def test_bits_per_dim_equals_lingen_eval(self):
        want = cli_json(self.tmp.name, "eval", "bits-per-dim", "-m", MODEL, "--limit", str(N_IMAGES))
        x = mnist_test(N_IMAGES)
        bpd = self.m.bits_per_dim(x)
        self.assertEqual((bpd.shape, bpd.dtype), ((N_IMAGES,), np.float64))
        self.assertAlmostEqual(bpd.mean(), want["bits_per_dim"], delta=1e-6)

    def test_bits_per_dim_first_given_equals_lingen_eval(self):
        want = cli_json(self.tmp.name, "eval", "bits-per-dim", "-m", MODEL, "--limit", "10")
        given = self.m.bits_per_dim(mnist_test(10)[:, :, :, np.newaxis], first_given=True)
        self.assertAlmostEqual(given.mean(), want["bits_per_dim_first_given"], delta=1e-6)

    def test_bits_per_dim_takes_any_integer_array(self):
        x = mnist_test(3)
        want = self.m.bits_per_dim(x)
        self.assertTrue(np.array_equal(self.m.bits_per_dim(x.astype(np.int64)), want))
        self.assertTrue(np.array_equal(self.m.bits_per_dim(x.tolist()), want))
        flipped = x[:, ::-1, :]   # not contiguous
        self.assertTrue(np.array_equal(self.m.bits_per_dim(flipped), self.m.bits_per_dim(flipped.copy())))
        self.assertEqual(self.m.bits_per_dim(np.zeros((0, 28, 28), np.uint8)).shape, (0,))

    def test_complete_equals_lingen_complete(self):
        grid = os.path.join(self.tmp.name, "complete.png")
        cli("complete", "-m", MODEL, "-i", "0-1", "-k", "3", "-r", "14", "-s", "4", "-o", grid)
        g = np.asarray(Image.open(grid))   # per input a row: original, occluded, 3 completions
        tiles = np.stack([g[2 + r * 30:30 + r * 30, 2 + c * 30:30 + c * 30] for r in range(2) for c in range(5)])
        self.assertEqual(g.shape, (2 * 30 + 2, 5 * 30 + 2))
        c = self.m.complete(mnist_test(2), rows=14, samples=3, seed=4)
        self.assertTrue(np.array_equal(c[..., 0], tiles.reshape(2, 5, 28, 28)[:, 2:]))

    def test_complete_keeps_the_top_rows(self):
        x = mnist_test(2)
        c = self.m.complete(x, rows=14, samples=3, seed=4)
        self.assertEqual((c.shape, c.dtype), ((2, 3, 28, 28, 1), np.uint8))
        for i in range(2):
            for k in range(3):
                self.assertTrue(np.array_equal(c[i, k, :14, :, 0], x[i, :14]))
        self.assertFalse(np.array_equal(c[0, 0], c[0, 1]), "two completions drew the same bottom half")
        self.assertTrue(np.array_equal(self.m.complete(x, keep=14 * 28, samples=3, seed=4), c))

    def test_progress_counts_up_to_the_total(self):
        seen = []
        x = self.m.sample(4, seed=6, batch=2, progress=lambda done, total: seen.append((done, total)))
        self.assertTrue(np.array_equal(x, self.m.sample(4, seed=6, batch=2)))
        self.assertEqual({t for _, t in seen}, {4 * 784})   # positions drawn, of n x 784
        self.assertEqual([d for d, _ in seen], sorted(d for d, _ in seen))
        self.assertEqual(seen[-1][0], 4 * 784)
        seen.clear()
        bpd = self.m.bits_per_dim(mnist_test(5), batch=2, progress=lambda done, total: seen.append((done, total)))
        self.assertEqual((seen, bpd.shape), ([(2, 5), (4, 5), (5, 5)], (5,)))   # in images, a pass at a time

    def test_progress_returning_true_stops(self):
        full = self.m.sample(4, seed=6, batch=2)
        with self.assertRaises(lingen.Stopped) as e:
            self.m.sample(4, seed=6, batch=2, progress=lambda done, total: done > total / 2)
        self.assertEqual((e.exception.status, e.exception.done), ("LINGEN_STOPPED", 2))   # the first batch's
        self.assertTrue(np.array_equal(e.exception.images, full[:2]))
        x = mnist_test(2)
        whole = self.m.complete(x, samples=2, seed=4, batch=2)
        with self.assertRaises(lingen.Stopped) as e:
            self.m.complete(x, samples=2, seed=4, batch=2, progress=lambda done, total: done > total / 2)
        self.assertEqual(e.exception.images.shape, (2, 28, 28, 1))   # input 0's two completions
        self.assertTrue(np.array_equal(e.exception.images, whole[0]))

    def test_progress_returning_true_stops_bits_per_dim(self):
        x = mnist_test(5)
        for step_form, finished in ((False, 4), (True, 2)):   # after the pass past half; inside it
            for first_given in (False, True):
                whole = self.m.bits_per_dim(x, batch=2, step_form=step_form, first_given=first_given)
                with self.assertRaises(lingen.Stopped) as e:
                    self.m.bits_per_dim(x, batch=2, step_form=step_form, first_given=first_given,
                                        progress=lambda done, total: done > total / 2)
                s = e.exception
                self.assertEqual((s.status, s.message, s.done, s.images),
                                 ("LINGEN_STOPPED", "bits_per_dim: stopped after %d of 5 images" % finished, finished,
                                  None))
                self.assertTrue(np.array_equal(s.bits_per_dim, whole[:finished]))   # bit for bit

    def test_progress_exception_stops_and_is_raised(self):
        calls = []

        def boom(done, total):
            calls.append(done)
            raise ZeroDivisionError("from the callable")
        with self.assertRaisesRegex(ZeroDivisionError, "from the callable"):
            self.m.sample(4, batch=2, progress=boom)
        self.assertEqual(len(calls), 1)   # not called again; the run stopped after that position
        self.assertEqual(self.m.sample(1).shape, (1, 28, 28, 1))   # the model works on

    def test_ctrl_c_in_a_run_stops_it(self):
        calls = []

        def interrupt(done, total):   # Ctrl-C during the run
            calls.append(done)
            if len(calls) == 1:
                os.kill(os.getpid(), signal.SIGINT)
        with self.assertRaises(KeyboardInterrupt):
            self.m.complete(mnist_test(2), samples=2, batch=2, progress=interrupt)
        self.assertLess(len(calls), 3, "the run went on after Ctrl-C")
        self.assertIs(signal.getsignal(signal.SIGINT), signal.default_int_handler)
        self.assertEqual(self.m.sample(1).shape, (1, 28, 28, 1))

    def test_ctrl_c_without_a_callable_stops_the_run(self):
        calls = [lambda n: self.m.sample(n, batch=4, seed=3), lambda n: self.m.bits_per_dim(mnist_test(n), batch=4)]
        for call in calls:
            start = time.perf_counter()
            call(4)
            four = time.perf_counter() - start
            n = 4 * max(4, int(2 / four) + 1)   # a run of 2 s at least
            timer = threading.Timer(0.1, os.kill, (os.getpid(), signal.SIGINT))
            start = time.perf_counter()
            timer.start()
            with self.assertRaises(KeyboardInterrupt):
                call(n)
            took = time.perf_counter() - start
            timer.join()
            self.assertLess(took, four * n / 4 / 2, "Ctrl-C waited for the end of the run")

    def test_precision_fastest_is_the_commands_auto(self):
        out = os.path.join(self.tmp.name, "fastest")
        env = dict(os.environ, LINGEN_INT8="1")
        subprocess.run([CLI, "sample", "-m", MODEL, "-n", "8", "-b", "8", "-s", "2", "--precision", "auto", "-o",
                        os.path.join(self.tmp.name, "f.png"), "--outdir", out], check=True, capture_output=True, env=env)
        tiles = np.stack([np.asarray(Image.open(os.path.join(out, "sample_%05d.png" % k))) for k in range(8)])
        os.environ["LINGEN_INT8"] = "1"   # read at each open: "fastest" is the fastest all the same
        try:
            with lingen.Model(MODEL, precision="fastest") as m:
                got = m.sample(8, seed=2, batch=8)
        finally:
            del os.environ["LINGEN_INT8"]
        self.assertTrue(np.array_equal(got[..., 0], tiles), "the images differ from lingen sample --precision auto's")

    def test_two_models_on_two_threads(self):
        other = lingen.Model(MODEL, precision="f32", threads=1)
        alone = [self.m.sample(2, seed=9), other.sample(2, seed=9)]
        got = [None, None]

        def run(i, model):
            got[i] = model.sample(2, seed=9)
        threads = [threading.Thread(target=run, args=(i, mod)) for i, mod in enumerate([self.m, other])]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        other.close()
        self.assertTrue(np.array_equal(got[0], alone[0]) and np.array_equal(got[1], alone[1]))

    def test_bad_images_raise(self):
        m = self.m
        with self.assertRaisesRegex(ValueError, r"\(n, 28, 28, 1\) or \(n, 28, 28\)"):
            m.bits_per_dim(np.zeros((2, 28, 27, 1), np.uint8))
        with self.assertRaises(ValueError):
            m.bits_per_dim(np.zeros((2, 28, 28, 3), np.uint8))
        with self.assertRaises(ValueError):
            m.bits_per_dim(np.zeros((28, 28), np.uint8))
        with self.assertRaisesRegex(TypeError, "float32"):
            m.bits_per_dim(np.zeros((1, 28, 28), np.float32))
        with self.assertRaises(TypeError):
            m.bits_per_dim(np.zeros((1, 28, 28), bool))
        with self.assertRaisesRegex(ValueError, "0..255, found 0..256"):
            m.bits_per_dim(np.full((1, 28, 28), 256, np.int16) * np.eye(28, dtype=np.int16))
        with self.assertRaisesRegex(ValueError, "0..255"):
            m.complete(np.full((1, 28, 28), -1, np.int64))

    def test_bad_arguments_raise(self):
        m = self.m
        for call, exc in [(lambda: m.sample(-1), ValueError), (lambda: m.sample("3"), TypeError),
                          (lambda: m.sample(1, temperature=0), ValueError), (lambda: m.sample(1, seed=-1), ValueError),
                          (lambda: m.sample(1, threads=5000), ValueError), (lambda: m.sample(1, batch=-2), ValueError),
                          (lambda: m.complete(mnist_test(1), rows=28), ValueError),
                          (lambda: m.complete(mnist_test(1), samples=0), ValueError),
                          (lambda: m.complete(mnist_test(1), rows=2, keep=56), ValueError),
                          (lambda: m.sample(1, progress=3), TypeError),
                          (lambda: lingen.Model(MODEL, device="gpu"), ValueError),
                          (lambda: lingen.Model(MODEL, precision="fp8"), ValueError),
                          (lambda: lingen.Model(3), TypeError)]:
            with self.assertRaises(exc):
                call()

    def test_library_errors_are_lingen_errors(self):
        with self.assertRaises(lingen.Error) as e:
            lingen.Model("no-such-model-xyz")
        self.assertEqual(e.exception.status, "LINGEN_ERR_NOT_FOUND")
        self.assertIn("no-such-model-xyz", e.exception.message)
        junk = os.path.join(self.tmp.name, "junk.bin")
        with open(junk, "wb") as f:
            f.write(b"not a model")
        with self.assertRaises(lingen.Error) as e:
            lingen.Model(junk)
        self.assertEqual(e.exception.status, "LINGEN_ERR_MODEL")
        self.assertIn("junk.bin", str(e.exception))

    def test_closed_model_raises(self):
        with lingen.Model(MODEL, threads=1) as m:
            self.assertEqual(m.sample(1).shape, (1, 28, 28, 1))
        for call in [lambda: m.sample(1), lambda: m.bits_per_dim(mnist_test(1)), lambda: m.complete(mnist_test(1))]:
            with self.assertRaisesRegex(ValueError, "closed"):
                call()
        with self.assertRaises(ValueError):
            with m:
                pass
        m.close()   # again: nothing
        self.assertIn("closed", repr(m))


if __name__ == "__main__":
    unittest.main()
