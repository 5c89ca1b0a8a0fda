"""lingen from Python: sample, score and complete images with lingen's models, as numpy arrays.

    import lingen
    with lingen.Model("mnist") as m:              # a name (as lingen --model) or a path
        x = m.sample(16, seed=1)                  # uint8 array (16, 28, 28, 1)
        bpd = m.bits_per_dim(x)                   # float64 array (16,)
        c = m.complete(x[:2], rows=14, samples=4) # uint8 array (2, 4, 28, 28, 1)

Images are uint8 arrays of shape (n, height, width, channels), channels last: (n, 28, 28, 1) for
MNIST, (n, 32, 32, 3) for CIFAR-10. Inputs may be any integer array with values 0..255, and for a
one-channel model (n, height, width) too. A call on the same seed gives the `lingen` command's
images byte for byte (same batch and precision).

The module is a ctypes binding of liblingen (include/lingen.h says what each call does, its
errors and its threads). It loads the library from $LINGEN_LIBRARY (a file) when set, else from
beside this file, from a build tree this file is in (build/), from the folder `make install` put
it in, and last from the system's search path (ld.so: LD_LIBRARY_PATH, ldconfig's cache).

Progress and stopping: each call takes progress=callable(done, total), called now and then with
the work done and its total (sample, complete: positions drawn; bits_per_dim: images). When it
returns True, sample and complete stop after the position in hand, bits_per_dim after the pass in
hand (step_form: the position), and each raises lingen.Stopped, which holds what was finished:
the images (.images), or bits_per_dim's figures of the images finished (.bits_per_dim). Ctrl-C,
where SIGINT has Python's default handler and the call runs on the main thread, stops them at the
same point, and KeyboardInterrupt is raised once the library has returned. An exception that the
callable raises stops the run as well and is raised from the call.

Errors: lingen.Error (the library's failure, with its status name and message: a model not found,
not enough memory for the batch...), ValueError (a bad value or shape, a closed model), TypeError
(not an integer array).
"""
import ctypes
import os
import signal
import threading

import numpy as np

__all__ = ["Model", "Error", "Stopped", "version", "library_path"]

# Where `make install` put liblingen (it writes the folder here when it installs this file).
_LIBDIR = None
_SONAME = "liblingen.so.0"

STATUS_NAMES = ["LINGEN_OK", "LINGEN_ERR_ARGUMENT", "LINGEN_ERR_NOT_FOUND", "LINGEN_ERR_MODEL",
                "LINGEN_ERR_MEMORY", "LINGEN_ERR_DEVICE", "LINGEN_ERR_RUN", "LINGEN_STOPPED"]
_STOPPED = STATUS_NAMES.index("LINGEN_STOPPED")
_DEVICES = {"cpu": 0, "cuda": 1}
_PRECISIONS = {"auto": 0, "f32": 1, "bf16": 2, "int8": 3, "fastest": 4}


class Error(Exception):
    """A failure reported by liblingen: .status (its name, e.g. "LINGEN_ERR_NOT_FOUND") and
    .message (lingen's one-line message)."""

    def __init__(self, status, message):
        self.status = STATUS_NAMES[status] if 0 <= status < len(STATUS_NAMES) else "LINGEN_UNKNOWN"
        self.message = message
        super().__init__("%s (%s)" % (message, self.status))


class Stopped(Error):
    """A run that its progress callable stopped (it returned True): .done, the images finished
    (complete: the completions, in their order); for sample and complete .images, those images: a
    uint8 array (done, height, width, channels); for bits_per_dim .bits_per_dim, their figures as
    the call returns them: a float64 array (done,) of the images first in its input. The other of
    the two is None."""

    def __init__(self, message, images=None, bits_per_dim=None):
        super().__init__(_STOPPED, message)
        self.done = len(images if images is not None else bits_per_dim)
        self.images = images
        self.bits_per_dim = bits_per_dim


class _Error(ctypes.Structure):
    _fields_ = [("status", ctypes.c_int), ("message", ctypes.c_char * 512)]


class _OpenOptions(ctypes.Structure):
    _fields_ = [("device", ctypes.c_int), ("precision", ctypes.c_int), ("threads", ctypes.c_int)]


_PROGRESS = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_double, ctypes.c_double)


class _RunOptions(ctypes.Structure):
    _fields_ = [("seed", ctypes.c_uint64), ("first", ctypes.c_int64), ("temperature", ctypes.c_double),
                ("batch", ctypes.c_int), ("threads", ctypes.c_int), ("step_form", ctypes.c_int),
                ("progress", _PROGRESS), ("progress_user", ctypes.c_void_p),
                ("stop", ctypes.c_void_p)]


def _candidates():
    """The library files to try, in order."""
    env = os.environ.get("LINGEN_LIBRARY")
    if env:
        return [env]
    here = os.path.dirname(os.path.abspath(__file__))
    found = [os.path.join(here, _SONAME),
             os.path.join(here, "..", "..", "build", _SONAME)]   # python/lingen/ in a source tree
    if _LIBDIR:
        found.append(os.path.join(_LIBDIR, _SONAME))
    return [p for p in found if os.path.exists(p)] + [_SONAME]


def _load():
    env = os.environ.get("LINGEN_LIBRARY")
    tried = []
    for path in _candidates():
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            tried.append("%s (%s)" % (path, e))
    hint = "" if env else "; set LINGEN_LIBRARY to its file, or build it with make lib"
    raise ImportError("lingen: cannot load liblingen: tried " + ", ".join(tried) + hint)


_lib, library_path = _load()

_P = ctypes.c_void_p
_U8P = ctypes.POINTER(ctypes.c_uint8)
_DP = ctypes.POINTER(ctypes.c_double)
_IP = ctypes.POINTER(ctypes.c_int)
_EP = ctypes.POINTER(_Error)
_RP = ctypes.POINTER(_RunOptions)


def _fn(name, restype, *argtypes):
    f = getattr(_lib, name)
    f.restype = restype
    f.argtypes = list(argtypes)
    return f


_version = _fn("lingen_version", ctypes.c_char_p)
_open = _fn("lingen_open", ctypes.c_int, ctypes.c_char_p, ctypes.POINTER(_OpenOptions), ctypes.POINTER(_P), _EP)
_close = _fn("lingen_close", None, _P)
_defaults = _fn("lingen_run_options_default", _RunOptions)
_sample = _fn("lingen_sample", ctypes.c_int, _P, ctypes.c_int, _RP, _U8P, _IP, _EP)
_bpd = _fn("lingen_bits_per_dim", ctypes.c_int, _P, _U8P, ctypes.c_int, _DP, _DP, _RP, _EP)
_complete = _fn("lingen_complete", ctypes.c_int, _P, _U8P, ctypes.c_int, ctypes.c_int, ctypes.c_int, _RP, _U8P,
                _IP, _EP)
_INT_FIELDS = ["height", "width", "channels", "seq_len", "layers", "heads", "d_model", "d_ff", "mixtures"]
_ints = {k: _fn("lingen_" + k, ctypes.c_int, _P) for k in _INT_FIELDS}
_params = _fn("lingen_parameters", ctypes.c_size_t, _P)
_strs = {k: _fn("lingen_" + k, ctypes.c_char_p, _P) for k in ["attention", "dataset", "path"]}
_meta_count = _fn("lingen_meta_count", ctypes.c_int, _P)
_meta_key = _fn("lingen_meta_key", ctypes.c_char_p, _P, ctypes.c_int)
_meta_value = _fn("lingen_meta_value", ctypes.c_char_p, _P, ctypes.c_int)


class _Run:
    """One call's progress callable and stop flag, as liblingen takes them (lingen_run_options'
    progress and stop), kept alive for the call. Used as a with block around the call: on the main
    thread, SIGINT (where Python's default handler has it) sets the flag instead of raising at once."""

    def __init__(self, progress):
        if progress is not None and not callable(progress):
            raise TypeError("progress must be callable(done, total), not %s" % type(progress).__name__)
        self.progress = progress
        self.flag = ctypes.c_int(0)   # sig_atomic_t
        self.raised = None            # raised after the call: the callable's exception, or Ctrl-C's
        self.callback = _PROGRESS(self._called)
        self.old_handler = None

    def _called(self, user, done, total):
        """The library's progress callback; also where Python runs a SIGINT's handler during a call."""
        if self.progress is None or self.raised is not None:
            return
        try:
            if self.progress(done, total):
                self.flag.value = 1
        except BaseException as e:   # raised again once the library returns
            self.raised = e
            self.flag.value = 1

    def _interrupt(self, signum, frame):
        self.flag.value = 1
        if self.raised is None:
            self.raised = KeyboardInterrupt()

    def options(self, o):
        """o with this call's progress callback and stop flag."""
        o.progress = self.callback
        o.stop = ctypes.addressof(self.flag)
        return o

    def __enter__(self):
        if (threading.current_thread() is threading.main_thread() and
                signal.getsignal(signal.SIGINT) is signal.default_int_handler):
            self.old_handler = signal.signal(signal.SIGINT, self._interrupt)
        return self

    def __exit__(self, *exc):
        if self.old_handler is not None:
            signal.signal(signal.SIGINT, self.old_handler)

    def check(self, status, err, stopped):
        """After the call: what stopped it raised (for the callable's True, stopped(message): the
        Stopped exception with what was finished), else the library's failure."""
        if self.raised is not None:
            raise self.raised
        if status == _STOPPED:
            raise stopped(err.message.decode(errors="replace"))
        _check(status, err)


def version():
    """The loaded liblingen's version, e.g. "1.0.0"."""
    return _version().decode()


def _check(status, err):
    if status != 0:
        raise Error(status, err.message.decode(errors="replace"))


def _int_arg(name, v, lo, hi):
    """v as an int in lo..hi, or TypeError / ValueError naming the argument."""
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise TypeError("%s must be an integer, not %s" % (name, type(v).__name__))
    if not lo <= v <= hi:
        raise ValueError("%s = %d: must be in %d..%d" % (name, v, lo, hi))
    return int(v)


class Model:
    """An open lingen model: Model(name_or_path, device="cpu", threads=0, precision="auto").

    name_or_path: a model file, or a name searched as `lingen --model` searches ($LINGEN_MODELS,
    ./models, the installed models). device: "cpu" or "cuda" (a build made with CUDA=1).
    threads: the default threads of its calls (0: every usable core). precision: the CPU's
    arithmetic for sampling steps, "auto" (the fastest this processor has, or what LINGEN_BF16 /
    LINGEN_INT8 ask for), "fastest" (the fastest whatever they say), "f32", "bf16" or "int8".
    Close it with close() or a with block; calls on a closed model raise ValueError.
    Calls from several threads run one at a time (the library's lock)."""

    def __init__(self, name_or_path, device="cpu", threads=0, precision="auto"):
        self._m = None
        if not isinstance(name_or_path, (str, os.PathLike)):
            raise TypeError("name_or_path must be a str or a path, not %s" % type(name_or_path).__name__)
        if device not in _DEVICES:
            raise ValueError("device %r: must be one of %s" % (device, ", ".join(_DEVICES)))
        if precision not in _PRECISIONS:
            raise ValueError("precision %r: must be one of %s" % (precision, ", ".join(_PRECISIONS)))
        o = _OpenOptions(_DEVICES[device], _PRECISIONS[precision], _int_arg("threads", threads, 0, 1024))
        handle, err = _P(), _Error()
        _check(_open(os.fsencode(name_or_path), ctypes.byref(o), ctypes.byref(handle), ctypes.byref(err)), err)
        self._m = handle.value
        self.device = device
        self.info = self._info()
        self.shape = (self.info["height"], self.info["width"], self.info["channels"])

    def _handle(self):
        if self._m is None:
            raise ValueError("the lingen model is closed")
        return self._m

    def _info(self):
        m = self._m
        info = {k: f(m) for k, f in _ints.items()}
        info.update({k: f(m).decode(errors="replace") for k, f in _strs.items()})
        info["parameters"] = _params(m)
        info["device"] = self.device
        info["metadata"] = {_meta_key(m, i).decode(errors="replace"): _meta_value(m, i).decode(errors="replace")
                            for i in range(_meta_count(m))}
        return info

    def close(self):
        """Free the model (again: nothing)."""
        if self._m is not None:
            _close(self._m)
            self._m = None

    def __enter__(self):
        self._handle()
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except (NameError, TypeError):   # at exit, after the module's names were torn down
            pass

    def __repr__(self):
        if self._m is None:
            return "<lingen.Model closed>"
        i = self.info
        return "<lingen.Model %s: %s attention, %s %dx%dx%d>" % (i["path"], i["attention"], i["dataset"], i["height"],
                                                                 i["width"], i["channels"])

    def _options(self, seed=1, first=0, temperature=1.0, batch=0, threads=0, step_form=False):
        o = _defaults()
        o.seed = _int_arg("seed", seed, 0, 2**64 - 1)
        o.first = _int_arg("first", first, 0, 2**63 - 1)
        if isinstance(temperature, bool) or not isinstance(temperature, (int, float, np.integer, np.floating)):
            raise TypeError("temperature must be a number, not %s" % type(temperature).__name__)
        if not 0.01 <= temperature <= 100:
            raise ValueError("temperature %g: must be in 0.01..100 (1 is the model's distribution)" % temperature)
        o.temperature = float(temperature)
        o.batch = _int_arg("batch", batch, 0, 2**31 - 1)
        o.threads = _int_arg("threads", threads, 0, 1024)
        o.step_form = 1 if step_form else 0
        return o

    def _images(self, images, what):
        """images as a C-contiguous uint8 array (n, H, W, C), checked: its shape, an integer dtype,
        every value in 0..255."""
        a = np.asarray(images)
        h, w, c = self.shape
        if a.dtype == np.bool_ or not np.issubdtype(a.dtype, np.integer):
            raise TypeError("%s: images must be integers 0..255 (uint8), not %s" % (what, a.dtype))
        if c == 1 and a.ndim == 3:
            a = a[..., np.newaxis]
        if a.ndim != 4 or a.shape[1:] != (h, w, c):
            want = "(n, %d, %d, %d)%s" % (h, w, c, " or (n, %d, %d)" % (h, w) if c == 1 else "")
            raise ValueError("%s: images of shape %s: the model takes %s" % (what, a.shape, want))
        if a.size and (a.min() < 0 or a.max() > 255):
            raise ValueError("%s: image values must be in 0..255, found %d..%d" % (what, a.min(), a.max()))
        if a.shape[0] > 2**31 - 1:
            raise ValueError("%s: %d images: at most %d at once" % (what, a.shape[0], 2**31 - 1))
        return np.ascontiguousarray(a, dtype=np.uint8)

    def sample(self, n, seed=1, first=0, temperature=1.0, batch=0, threads=0, progress=None):
        """n new images, a uint8 array (n, height, width, channels). Image k draws from random
        stream first + k of the seed: it depends on (seed, first + k) alone (and, through the
        kernel, the batch: 0 is the `lingen sample` default). threads: 0 is the model's.
        progress: callable(done, total) in positions drawn (the module's doc: stopping)."""
        m = self._handle()
        n = _int_arg("n", n, 0, 2**31 - 1)
        run = _Run(progress)
        o = run.options(self._options(seed, first, temperature, batch, threads))
        out = np.empty((n,) + self.shape, dtype=np.uint8)
        done, err = ctypes.c_int(), _Error()
        with run:
            status = _sample(m, n, ctypes.byref(o), out.ctypes.data_as(_U8P), ctypes.byref(done), ctypes.byref(err))
        run.check(status, err, lambda message: Stopped(message, out[:done.value]))
        return out

    def bits_per_dim(self, images, batch=0, step_form=False, threads=0, first_given=False, progress=None):
        """Bits per dimension of each image, a float64 array (n,): -(sum of log2 p) / N over its
        N values, the first predicted from the start token; first_given=True: the sum without
        the first value over N - 1 (the paper's convention). Their mean over a test set is what
        `lingen eval bits-per-dim` reports. step_form: one position at a time (the same figures
        to float32's rounding). progress: callable(done, total) in images (the module's doc:
        stopping; lingen.Stopped's .bits_per_dim holds the finished images' figures)."""
        m = self._handle()
        x = self._images(images, "bits_per_dim")
        run = _Run(progress)
        o = run.options(self._options(batch=batch, threads=threads, step_form=step_form))
        n = x.shape[0]
        per, given = np.empty(n, dtype=np.float64), np.empty(n, dtype=np.float64)
        err = _Error()
        with run:
            status = _bpd(m, x.ctypes.data_as(_U8P), n, per.ctypes.data_as(_DP), given.ctypes.data_as(_DP),
                          ctypes.byref(o), ctypes.byref(err))
        result = given if first_given else per

        def stopped(message):   # the images finished come first; the others' figures are NaN (lingen.h)
            return Stopped(message, bits_per_dim=result[:np.count_nonzero(~np.isnan(per))])
        run.check(status, err, stopped)
        return result

    def complete(self, images, rows=None, samples=4, seed=1, temperature=1.0, batch=0, threads=0, keep=None,
                 progress=None):
        """Complete each image `samples` times: keep its top `rows` rows (default half the height),
        or its first `keep` values (channels of a pixel side by side, pixels row by row), and draw
        the rest. A uint8 array (n, samples, height, width, channels); completion k of image i
        draws from random stream i * samples + k of the seed. progress: as sample's."""
        m = self._handle()
        x = self._images(images, "complete")
        h, w, c = self.shape
        if keep is not None and rows is not None:
            raise ValueError("complete: give rows or keep, not both")
        if keep is None:
            rows = h // 2 if rows is None else _int_arg("rows", rows, 0, h - 1)
            keep = rows * w * c
        keep = _int_arg("keep", keep, 0, h * w * c - 1)
        samples = _int_arg("samples", samples, 1, 2**31 - 1)
        n = x.shape[0]
        if n * samples > 2**31 - 1:
            raise ValueError("complete: %d images x %d samples: at most %d completions at once" % (n, samples, 2**31 - 1))
        run = _Run(progress)
        o = run.options(self._options(seed, 0, temperature, batch, threads))
        out = np.empty((n, samples) + self.shape, dtype=np.uint8)
        done, err = ctypes.c_int(), _Error()
        with run:
            status = _complete(m, x.ctypes.data_as(_U8P), n, keep, samples, ctypes.byref(o),
                               out.ctypes.data_as(_U8P), ctypes.byref(done), ctypes.byref(err))
        run.check(status, err, lambda message: Stopped(message, out.reshape((-1,) + self.shape)[:done.value]))
        return out
