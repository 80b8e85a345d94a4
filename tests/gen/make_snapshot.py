#!/usr/bin/env python3
"""Write synthetic PyTorch CUDA memory snapshots, shaped like real ones.

The snapshot is built as the same Python objects PyTorch builds and written
with CPython's own pickle.dump, so the byte stream has the real opcode mix:
frame dicts are shared objects reused across events and blocks, frame lists
are often one list object for a repeated call site, keys and action names are
memoized once. A small caching-allocator simulation keeps everything
consistent: allocations live inside segments, addresses are reused after a
free, free_requested is followed by free_completed for the same block, time
increases, and `segments` describes exactly the blocks alive at the end.

For a complete trace, per device:
    sum(active_size of the device's segments)
        == bytes live at the end of a replay of the trace + baseline
where the baseline is what was live when recording started (0 unless
--late-start). With --ring-buffer the same formula with the unmatched frees
added back gives the bytes live just before the first kept event; --corpus
writes those expected baselines to manifest.json.

--replicate FIXTURE scales a real snapshot up instead of simulating one: the
fixture (a data-only pickle, e.g. from ../shared/fixtures/real/; one that needs
a global is refused, nothing in it is called; .gz is read too) is loaded with
CPython's pickle, and the trace of its busiest device is repeated until this
device's trace has exactly N = --events entries (other devices' traces and
segments, and every other top-level key, are kept as they are). Repetition k
(from 0) has its addresses moved up by k x a stride (the device's address span,
trace and dump, rounded up to 2**40) and its times by k x a period, so each
repetition is an independent allocator history after the previous one.

Every repetition but the last is closed out, as the allocator would write it
if the program released everything (freed every tensor, then
torch.cuda.empty_cache()): for each block of the fixture's dump that is
allocated a free_requested then a free_completed (for one awaiting free just
the free_completed), in address order, with the block's requested size as
PyTorch writes it; then a segment_free of each of the dump's segments, or
for an expandable segment a segment_unmap of its mapped range (what the dump
lists as a segment). Mirroring it, every repetition but the first is opened
with what the fixture held before its trace began (its pre-trace state: the
dump's segments and live blocks walked back through the trace, as memsnap's
replay walks it): a segment_alloc of each segment, or a segment_map of each
mapped range of an expandable segment (adjacent pages of one stream and
pool as one range), in address order; then for each block, in address
order, an alloc of its requested size (the replay derives the block's size
from it with the split rule) and, for a block awaiting free, a
free_requested. These entries are the repetition's, shifted like it; their
keys are those of the fixture's last allocator entry (the others, e.g.
compile_context and user_metadata, copied from it); the close-out's times
one mean gap apart after the repetition's last entry, the opening's one
mean gap apart ending one gap before its first (the period is the trace's
duration, annotations included, plus one mean gap per close-out and
opening entry and one more); their frames the fixture's last free stack
(its last segment release's for the segment entries), for the opening its
last alloc stack (its last segment_alloc's or segment_map's), in one list
per block and one for the segments, as PyTorch shares a call's context.
The dump's `segments` of the device are then the last repetition's (the
fixture's, shifted): one dump, as a long capture has, and one pre-trace
state, the first repetition's: walking the trace back from the dump stays
as exact as on the fixture (each repetition's opening is undone to an empty
allocator, each earlier repetition's end state is rebuilt from its
close-out, blocks allocated before the fixture's trace began with the split
rule's size), and the state it reaches at the start is the fixture's where
the first repetition is cut (the fixture's own pre-trace state when the
first repetition is its trace and close-out whole), not one per
repetition. The opening and close-out entries count in N. The count is
exact: the last repetition is the opening and the fixture's trace, each
one before it opening, trace and close-out, and the first is cut to what
is left of N from its start (what a wrapped ring buffer keeps: a suffix of
the opening, trace and close-out; it still ends released).

The device's annotations are repeated with the times. Frame dicts stay the
fixture's objects in every repetition, so pickle memoizes them once as
PyTorch's files do; frame lists are new objects in each repetition (lists
the fixture shares, e.g. a free_requested's and its free_completed's, stay
shared inside it), so each entry's list is written again with memo
references to the frame dicts, as a long real run writes it (1M entries from
the default bench fixture: ~140 bytes per entry; the fixture's own file is
~164, its opening and close-out entries cost less than its trace's).
--shared-frame-lists keeps the fixture's list objects in every repetition
instead (a later repetition's entry then writes its list as one memo
reference: ~62 bytes per entry, unlike a real file). A string only one
entry holds (PyTorch's 'N/A') is a new object per entry, written again as
PyTorch writes it. Written with the fixture's pickle protocol (4 for
PyTorch's files) unless --protocol is given. --manifest writes the
repetition count, the close-out's and opening's lengths, stride and period.

--stream writes each repetition as it is made instead of building the whole
trace first (a 50M-entry trace as Python objects needs far more than a 24 GiB
machine has): the same snapshot, read back equal by CPython and by memsnap,
with protocol 3's explicit memo numbers (see StreamingPickler): 1M entries of
the bench fixture in 7 s and 110 MB of memory here.

Standard library only. Deterministic for a given set of arguments.

    make_snapshot.py --out PATH [--events N] [--protocol P] [--devices K]
                     [--stacks python|all] [--steps S] [--marks] [--oom]
                     [--expandable] [--ring-buffer K] [--late-start] [--legacy]
                     [--big-addresses] [--graph-pool] [--no-time] [--seed S]
                     [--gzip] [--top-level-list] [--empty]
    make_snapshot.py --replicate FIXTURE --events N --out PATH [--gzip]
                     [--shared-frame-lists] [--protocol P] [--stream] [--manifest PATH]
    make_snapshot.py --corpus DIR
"""

import argparse
import bisect
import gzip
import io
import json
import math
import os
import pickle
import random
import sys

# Wide ints are exact in both directions: lift CPython's str()/int() digit
# limit (3.11+), which exists to bound the quadratic conversion memsnap avoids.
if hasattr(sys, 'set_int_max_str_digits'):
    sys.set_int_max_str_digits(0)

KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30

SMALL_REQUEST = MiB          # requests up to 1 MiB come from the small pool
SMALL_SEGMENT = 2 * MiB      # small pool segments / expandable small granule
LARGE_SEGMENT = 20 * MiB     # large pool segment for requests below 10 MiB
MIN_LARGE_ALLOC = 10 * MiB
LARGE_ROUND = 2 * MiB
BLOCK_ROUND = 512

SIDE_STREAM = 0x55D5E3A01C40  # a cudaStream_t for communication buffers

USER = '/home/alice/projects/llm-train'
PYLIB = '/opt/conda/envs/train/lib/python3.11'
SITE = PYLIB + '/site-packages'
TORCH = SITE + '/torch'
TRAIN = USER + '/train.py'
MODULE = TORCH + '/nn/modules/module.py'
FUNCTIONAL = TORCH + '/nn/functional.py'

INTERNAL_FREE_STATE = 0
ALLOCATED = 1
PENDING_FREE = 2


def round_up(x, m):
    return (x + m - 1) // m * m


# ---------------------------------------------------------------------------
# Call stacks: shared frame dicts, shared frame lists per call site.


class Frames:
    """Interns frame dicts: one dict object per (name, filename, line)."""

    def __init__(self, legacy):
        self.legacy = legacy
        self.table = {}

    def __call__(self, name, filename='??', line=0):
        key = (name, filename, line)
        frame = self.table.get(key)
        if frame is None:
            if self.legacy:  # PyTorch 2.0 wrote filename first
                frame = {'filename': filename, 'name': name, 'line': line}
            else:
                frame = {'name': name, 'filename': filename, 'line': line}
            self.table[key] = frame
        return frame


CPP_GATHER = [
    ('torch::unwind::unwind()', '??'),
    ('torch::CapturedTraceback::gather(bool, bool, bool)', '??'),
    ('torch::cuda::(anonymous namespace)::gather_with_cpp()', 'memory_snapshot.cpp'),
]
CPP_MALLOC = [
    ('c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc('
     'signed char, unsigned long, CUstream_st*)', 'CUDACachingAllocator.cpp'),
    ('c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::malloc('
     'void**, signed char, unsigned long, CUstream_st*)', ''),
    ('c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::allocate('
     'unsigned long)', ''),
    ('at::TensorBase at::detail::_empty_strided_generic<c10::ArrayRef<long> >('
     'c10::ArrayRef<long>, c10::ArrayRef<long>, c10::Allocator*, '
     'c10::DispatchKeySet, c10::ScalarType)', ''),
    ('at::detail::empty_strided_cuda(c10::ArrayRef<long>, c10::ArrayRef<long>, '
     'c10::ScalarType, std::optional<c10::Device>)', '??'),
    ('at::native::empty_strided_cuda(c10::ArrayRef<long>, c10::ArrayRef<long>, '
     'std::optional<c10::ScalarType>, std::optional<c10::Layout>, '
     'std::optional<c10::Device>, std::optional<bool>)', 'EmptyTensor.cpp'),
    ('at::_ops::empty_strided::call(c10::ArrayRef<c10::SymInt>, '
     'c10::ArrayRef<c10::SymInt>, std::optional<c10::ScalarType>, '
     'std::optional<c10::Layout>, std::optional<c10::Device>, '
     'std::optional<bool>)', '??'),
]
CPP_FREE = [
    ('c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::free('
     'c10::cuda::CUDACachingAllocator::Native::(anonymous namespace)::Block*)',
     'CUDACachingAllocator.cpp'),
    ('c10::cuda::CUDACachingAllocator::Native::local_raw_delete(void*)', ''),
    ('c10::StorageImpl::~StorageImpl()', ''),
    ('c10::intrusive_ptr<c10::StorageImpl, c10::detail::'
     'intrusive_target_default_null_type<c10::StorageImpl> >::reset_()', ''),
    ('c10::TensorImpl::~TensorImpl()', '??'),
]
CPP_PROCESS_EVENTS = [
    ('c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::'
     'process_events(std::shared_ptr<c10::GatheredContext> const&)',
     'CUDACachingAllocator.cpp'),
]
CPP_OPS = {
    'linear': [
        ('at::native::structured_addmm_out_cuda::impl(at::Tensor const&, '
         'at::Tensor const&, at::Tensor const&, c10::Scalar const&, '
         'c10::Scalar const&, at::Tensor const&)', ''),
        ('at::_ops::addmm::call(at::Tensor const&, at::Tensor const&, '
         'at::Tensor const&, c10::Scalar const&, c10::Scalar const&)', '??'),
        ('at::native::linear(at::Tensor const&, at::Tensor const&, '
         'std::optional<at::Tensor> const&)', '??'),
        ('at::_ops::linear::call(at::Tensor const&, at::Tensor const&, '
         'std::optional<at::Tensor> const&)', '??'),
        ('torch::autograd::THPVariable_linear(_object*, _object*, _object*)',
         'python_nn_functions.cpp'),
    ],
    'softmax': [
        ('at::native::structured_softmax_cuda_out::impl(at::Tensor const&, long, '
         'bool, at::Tensor const&)', ''),
        ('at::_ops::_softmax::call(at::Tensor const&, long, bool)', '??'),
        ('at::_ops::softmax_int::call(at::Tensor const&, long, '
         'std::optional<c10::ScalarType>)', '??'),
        ('torch::autograd::THPVariable_softmax(_object*, _object*, _object*)',
         'python_torch_functions_2.cpp'),
    ],
    'layer_norm': [
        ('at::native::layer_norm_cuda(at::Tensor const&, c10::ArrayRef<long>, '
         'std::optional<at::Tensor> const&, std::optional<at::Tensor> const&, '
         'double)', 'layer_norm_kernel.cu'),
        ('at::_ops::native_layer_norm::call(at::Tensor const&, '
         'c10::ArrayRef<c10::SymInt>, std::optional<at::Tensor> const&, '
         'std::optional<at::Tensor> const&, double)', '??'),
        ('at::native::layer_norm_symint(at::Tensor const&, '
         'c10::ArrayRef<c10::SymInt>, std::optional<at::Tensor> const&, '
         'std::optional<at::Tensor> const&, double, bool)', '??'),
        ('torch::autograd::THPVariable_layer_norm(_object*, _object*, _object*)',
         'python_torch_functions_1.cpp'),
    ],
    'gelu': [
        ('at::native::structured_gelu_out_cuda::impl(at::Tensor const&, '
         'c10::basic_string_view<char>, at::Tensor const&)', ''),
        ('at::_ops::gelu::call(at::Tensor const&, c10::basic_string_view<char>)',
         '??'),
        ('torch::autograd::THPVariable_gelu(_object*, _object*, _object*)',
         'python_nn_functions.cpp'),
    ],
    'add': [
        ('at::native::structured_ufunc_add_CUDA::impl(at::Tensor const&, '
         'at::Tensor const&, c10::Scalar const&, at::Tensor const&)', ''),
        ('at::_ops::add_Tensor::call(at::Tensor const&, at::Tensor const&, '
         'c10::Scalar const&)', '??'),
        ('torch::autograd::THPVariable_add(_object*, _object*, _object*)',
         'python_variable_methods.cpp'),
    ],
    'matmul': [
        ('at::native::structured_bmm_out_cuda::impl(at::Tensor const&, '
         'at::Tensor const&, at::Tensor const&)', ''),
        ('at::_ops::bmm::call(at::Tensor const&, at::Tensor const&)', '??'),
        ('at::native::matmul(at::Tensor const&, at::Tensor const&)', '??'),
        ('at::_ops::matmul::call(at::Tensor const&, at::Tensor const&)', '??'),
        ('torch::autograd::THPVariable_matmul(_object*, _object*, _object*)',
         'python_torch_functions_0.cpp'),
    ],
    'copy': [
        ('at::native::copy_(at::Tensor&, at::Tensor const&, bool)', '??'),
        ('at::_ops::copy_::call(at::Tensor&, at::Tensor const&, bool)', '??'),
        ('at::native::_to_copy(at::Tensor const&, std::optional<c10::ScalarType>, '
         'std::optional<c10::Layout>, std::optional<c10::Device>, '
         'std::optional<bool>, bool, std::optional<c10::MemoryFormat>)', '??'),
        ('at::_ops::_to_copy::call(at::Tensor const&, '
         'std::optional<c10::ScalarType>, std::optional<c10::Layout>, '
         'std::optional<c10::Device>, std::optional<bool>, bool, '
         'std::optional<c10::MemoryFormat>)', '??'),
        ('torch::autograd::THPVariable_to(_object*, _object*, _object*)',
         'python_variable_methods.cpp'),
    ],
    'foreach': [
        ('at::native::foreach_tensor_mul_scalar_kernel_cuda(c10::ArrayRef<at::Tensor>, '
         'c10::Scalar const&)', ''),
        ('at::_ops::_foreach_mul_Scalar::call(c10::ArrayRef<at::Tensor>, '
         'c10::Scalar const&)', '??'),
        ('torch::autograd::THPVariable__foreach_mul(_object*, _object*, _object*)',
         'python_torch_functions_2.cpp'),
    ],
}
CPP_BACKWARD = [
    ('torch::autograd::generated::AddmmBackward0::apply('
     'std::vector<at::Tensor, std::allocator<at::Tensor> >&&)', '??'),
    ('torch::autograd::Node::operator()(std::vector<at::Tensor, '
     'std::allocator<at::Tensor> >&&)', ''),
    ('torch::autograd::call_function(std::shared_ptr<torch::autograd::GraphTask>&, '
     'torch::autograd::Node*, torch::autograd::InputBuffer&)', ''),
    ('torch::autograd::Engine::evaluate_function(std::shared_ptr<torch::autograd::'
     'GraphTask>&, torch::autograd::Node*, torch::autograd::InputBuffer&, '
     'std::shared_ptr<torch::autograd::ReadyQueue> const&)', '??'),
    ('torch::autograd::Engine::thread_main(std::shared_ptr<torch::autograd::'
     'GraphTask> const&)', '??'),
    ('torch::autograd::Engine::thread_init(int, std::shared_ptr<torch::autograd::'
     'ReadyQueue> const&, bool)', '??'),
    ('torch::autograd::python::PythonEngine::thread_init(int, '
     'std::shared_ptr<torch::autograd::ReadyQueue> const&, bool)', '??'),
]
CPP_THREAD_TAIL = [
    ('execute_native_thread_routine',
     '/opt/conda/conda-bld/gcc-compiler_1654084175708/work/gcc/libstdc++-v3/'
     'src/c++11/thread.cc', 82),
    ('start_thread', '??'),
    ('__clone3', ''),
]
CPP_INTERP = [
    [('_PyEval_EvalFrameDefault', '??')],
    [('_PyEval_EvalFrameDefault', '??'), ('_PyFunction_Vectorcall', '??')],
    [('_PyEval_EvalFrameDefault', '??'), ('_PyFunction_Vectorcall', '??'),
     ('PyObject_Call', '??')],
    [('_PyEval_EvalFrameDefault', '??'), ('_PyFunction_Vectorcall', '??'),
     ('_PyObject_FastCallDictTstate', '??'), ('_PyObject_Call_Prepend', '??'),
     ('_PyObject_MakeTpCall', '??')],
]
CPP_PROCESS_TAIL = [
    ('PyEval_EvalCode', '??'), ('run_eval_code_obj', '??'), ('run_mod', '??'),
    ('pyrun_file', '??'), ('_PyRun_SimpleFileObject', '??'),
    ('_PyRun_AnyFileObject', '??'), ('Py_RunMain', '??'), ('Py_BytesMain', '??'),
    ('__libc_start_call_main', '??'), ('__libc_start_main_impl', ''),
    ('_start', '??'),
]

# Python frames, outermost first: (name, filename, line)
ROOT = [('<module>', TRAIN, 231), ('main', TRAIN, 219)]
RUNPY = [('_run_module_as_main', PYLIB + '/runpy.py', 198),
         ('_run_code', PYLIB + '/runpy.py', 88)]
WRAP = [('_wrapped_call_impl', MODULE, 1736), ('_call_impl', MODULE, 1747)]
MODEL_FILES = {
    'transformer': USER + '/model/transformer.py',
    'block': USER + '/model/block.py',
    'attention': USER + '/model/attention.py',
    'mlp': USER + '/model/mlp.py',
    'rotary': USER + '/model/rotary_données.py',   # non-ASCII on purpose
}
LEAVES = {  # leaf python frames (outermost first) and the C++ op below them
    'linear': ([('forward', TORCH + '/nn/modules/linear.py', 125)], 'linear'),
    'norm': ([('forward', TORCH + '/nn/modules/normalization.py', 217),
              ('layer_norm', FUNCTIONAL, 2910)], 'layer_norm'),
    'softmax': ([('softmax', FUNCTIONAL, 2140)], 'softmax'),
    'gelu': ([], 'gelu'),
    'add': ([], 'add'),
    'matmul': ([], 'matmul'),
}


class Program:
    """The synthetic training script: call sites with shared frame lists."""

    def __init__(self, rng, stacks, legacy):
        self.rng = rng
        self.all = stacks == 'all'
        self.frames = Frames(legacy)
        self.root = (RUNPY if rng.random() < 0.5 else []) + ROOT
        self._lists = {}

    def _stack(self, py, cpp_top, cpp_tail_thread=False):
        """py: python frames outermost first; cpp_top: C++ frames innermost
        first above the innermost python frame. Returns a shared list object,
        innermost first."""
        f = self.frames
        if not self.all:
            frames = [f(*p) for p in reversed(py)]
        else:
            frames = [f(*c) for c in CPP_GATHER]
            frames += [f(*c) for c in cpp_top]
            if cpp_tail_thread:
                frames += [f(*c) for c in CPP_THREAD_TAIL]
            else:
                for i, p in enumerate(reversed(py)):
                    frames.append(f(*p))
                    frames += [f(*c) for c in CPP_INTERP[(len(py) - i + p[2]) % len(CPP_INTERP)]]
                frames += [f(*c) for c in CPP_PROCESS_TAIL]
        key = tuple(id(x) for x in frames)
        existing = self._lists.get(key)
        if existing is not None:
            return existing
        self._lists[key] = frames
        return frames

    def train_line(self, phase):
        return self.root + [('train', TRAIN, {'data': 161, 'fwd': 166, 'bwd': 168,
                                              'opt': 171, 'zero': 159, 'comm': 169,
                                              'init': 152}[phase])]

    # -- allocation sites ---------------------------------------------------
    def weight_site(self, i):
        depth = 1 + i % 4
        py = self.root + [('build_model', TRAIN, 140), ('to', MODULE, 1355)]
        py += [('_apply', MODULE, 928)] * depth + [('_apply', MODULE, 955),
                                                   ('convert', MODULE, 1341)]
        return self._stack(py, CPP_MALLOC + CPP_OPS['copy'])

    def data_site(self, i):
        py = self.train_line('data') + [('to_device', USER + '/data/collate.py', 44 + i)]
        return self._stack(py, CPP_MALLOC + CPP_OPS['copy'])

    def forward_site(self, sub, line, leaf):
        leaf_py, op = LEAVES[leaf]
        py = self.train_line('fwd') + [('train_step', TRAIN, 97)] + WRAP
        py += [('forward', MODEL_FILES['transformer'], 212)] + WRAP
        py += [('forward', MODEL_FILES['block'], {'attention': 41, 'mlp': 45,
                                                  'rotary': 39}.get(sub, 43))]
        py += WRAP + [('forward', MODEL_FILES.get(sub, MODEL_FILES['block']), line)]
        if leaf_py and leaf in ('linear', 'norm'):
            py += WRAP
        py += leaf_py
        return self._stack(py, CPP_MALLOC + CPP_OPS[op])

    def layer_site(self, k):
        """Forward call site k of a model with many modules (--sites): the
        module file and the layer line vary, so N sites make N distinct
        stacks from a few hundred distinct frames."""
        py = self.train_line('fwd') + [('train_step', TRAIN, 97)] + WRAP
        py += [('forward', MODEL_FILES['transformer'], 212)] + WRAP
        py += [('run_layer', MODEL_FILES['transformer'], 100 + (k // 200) % 30)] + WRAP
        py += [('forward', USER + '/model/blocks/block_%03d.py' % (k % 200), 40 + k % 7)]
        leaf = ('linear', 'norm', 'softmax', 'gelu', 'add', 'matmul')[k % 6]
        leaf_py, op = LEAVES[leaf]
        py += leaf_py
        return self._stack(py, CPP_MALLOC + CPP_OPS[op])

    def loss_site(self):
        py = self.train_line('fwd') + [('train_step', TRAIN, 98),
                                       ('cross_entropy', FUNCTIONAL, 3494)]
        return self._stack(py, CPP_MALLOC + CPP_OPS['softmax'])

    def backward_site(self, i):
        if not self.all:
            return None  # the autograd thread has no Python frames: fresh []
        node = ['AddmmBackward0', 'MmBackward0', 'NativeLayerNormBackward0',
                'GeluBackward0', 'SoftmaxBackward0', 'BmmBackward0'][i % 6]
        first = (CPP_BACKWARD[0][0].replace('AddmmBackward0', node), '??')
        return self._stack([], CPP_MALLOC + [first] + CPP_BACKWARD[1:], cpp_tail_thread=True)

    def optimizer_site(self, i, kind):
        py = self.train_line('opt') + [('wrapper', TORCH + '/optim/optimizer.py', 487),
                                       ('_use_grad', TORCH + '/optim/optimizer.py', 91),
                                       ('step', TORCH + '/optim/adamw.py', 220)]
        if kind == 'state':
            py += [('_init_group', TORCH + '/optim/adamw.py', 160 + 4 * (i % 2)),
                   ('zeros_like', TORCH + '/_refs/__init__.py', 4860)]
            cpp = CPP_MALLOC
        else:
            py += [('adamw', TORCH + '/optim/adamw.py', 782),
                   ('_multi_tensor_adamw', TORCH + '/optim/adamw.py', 560 + 7 * i)]
            cpp = CPP_MALLOC + CPP_OPS['foreach']
        return self._stack(py, cpp)

    def grad_site(self, i):
        if not self.all:
            return None
        return self.backward_site(i + 3)

    def comm_site(self, i):
        py = self.train_line('comm') + [('all_reduce_grads', USER + '/dist.py', 33 + i),
                                        ('all_reduce', TORCH + '/distributed/'
                                         'distributed_c10d.py', 2501)]
        return self._stack(py, CPP_MALLOC)

    def free_site(self, phase, i=0):
        if phase == 'bwd' and not self.all:
            return None
        if phase == 'bwd':
            return self._stack([], CPP_FREE + CPP_BACKWARD[1 + i % 3:], cpp_tail_thread=True)
        if phase == 'events':
            return self._stack([], CPP_PROCESS_EVENTS + CPP_MALLOC[1:4] + CPP_OPS['copy'],
                               cpp_tail_thread=False) if self.all else None
        py = self.train_line(phase)
        if phase == 'fwd':
            py = py + [('train_step', TRAIN, 97)] + WRAP + [
                ('forward', MODEL_FILES['transformer'], 214 + i % 3)]
        elif phase == 'opt':
            py = py + [('wrapper', TORCH + '/optim/optimizer.py', 487),
                       ('step', TORCH + '/optim/adamw.py', 230)]
        return self._stack(py, CPP_FREE + [('THPVariable_subclass_dealloc(_object*)',
                                            'python_variable.cpp')])

    def oom_site(self):
        return self.forward_site('mlp', 24, 'linear')


# ---------------------------------------------------------------------------
# The caching allocator.


class Block:
    __slots__ = ('addr', 'size', 'req', 'state', 'frames', 'seg', 'dead')

    def __init__(self, addr, size, seg):
        self.addr = addr
        self.size = size
        self.req = 0
        self.state = INTERNAL_FREE_STATE
        self.frames = None
        self.seg = seg
        self.dead = False


class Segment:
    __slots__ = ('addr', 'total', 'bump', 'blocks', 'pool', 'live', 'frames')

    def __init__(self, addr, total, pool, frames):
        self.addr = addr
        self.total = total
        self.bump = 0
        self.blocks = []
        self.pool = pool
        self.live = 0      # blocks allocated or pending free
        self.frames = frames


class Pool:
    __slots__ = ('stream', 'small', 'pool_id', 'free', 'segments', 'current')

    def __init__(self, stream, small, pool_id):
        self.stream = stream
        self.small = small
        self.pool_id = pool_id
        self.free = {}        # block size -> [Block]
        self.segments = []
        self.current = None   # the segment carved from


class Options:
    def __init__(self, **kw):
        self.events = 2000
        self.protocol = 4
        self.devices = 1
        self.stacks = 'python'
        self.steps = 0
        self.marks = False
        self.bridge = False  # implies marks
        self.oom = False
        self.oom_device = 0  # the device whose trace ends in the oom
        self.expandable = False
        self.ring_buffer = 0
        self.late_start = False
        self.legacy = False
        self.big_addresses = False
        self.negative_addresses = False
        self.graph_pool = False
        self.no_time = False
        self.seed = 0
        self.gzip = False
        self.top_level_list = False
        self.empty = False
        self.extras = False
        self.odd_actions = False
        self.open_last_step = False
        self.__dict__.update(kw)


class Device:
    """Simulates one device's caching allocator and records its trace."""

    def __init__(self, dev, opts, program, rng, vbase, t0):
        self.dev = dev
        self.o = opts
        self.p = program
        self.rng = rng
        self.trace = []
        self.annotations = []
        self.t = t0
        self.vnext = vbase
        self.seg_reuse = {}
        self.pools = {}
        self.pending = []
        self.live_bytes = 0            # sum of req of allocated/pending blocks
        self.record_start_live = 0     # live bytes when recording started
        self.recording = True
        # share of entries whose frame list is a fresh list (of the shared frame
        # dicts) rather than the call site's list object; real stacks='all'
        # files have more of them
        self.fresh_p = 0.5 if opts.stacks == 'all' else 0.35
        self.timed = not (opts.no_time or opts.legacy)
        self.compile_context = not (opts.no_time or opts.legacy)
        self.limit = 0
        self._make_emit()

    # -- events ---------------------------------------------------------------
    def _make_emit(self):
        rnd = self.rng.random
        dev = self

        if not self.timed:
            def emit(action, addr, size, stream, frames):
                dev.t += 1 + int(rnd() * 24)
                if dev.recording:
                    dev.trace.append({'action': action, 'addr': addr, 'size': size,
                                      'stream': stream, 'frames': frames})
        else:
            na_head, na_tail = 'N/', 'A'

            def emit(action, addr, size, stream, frames):
                t = dev.t = dev.t + 1 + int(rnd() * 24)
                if dev.recording:
                    # a fresh 'N/A' object per entry, as PyTorch writes it
                    dev.trace.append({'action': action, 'addr': addr, 'size': size,
                                      'stream': stream, 'time_us': t,
                                      'compile_context': na_head + na_tail,
                                      'frames': frames})
        self.emit = emit

    def full(self):
        return len(self.trace) >= self.limit

    def record_plain(self, action, size, **extra):
        """An entry without frames ('snapshot', unknown actions)."""
        if self.full() or not self.recording:
            return
        self.t += 1
        entry = {'action': action, 'addr': 0, 'size': size, 'stream': 0}
        if self.timed:
            entry['time_us'] = self.t
        entry.update(extra)
        self.trace.append(entry)

    def annotate(self, name, stage):
        if self.timed and self.recording:
            self.t += 1   # strictly between the events before and after
            self.annotations.append({'stage': stage, 'name': name, 'device': self.dev,
                                     'time_us': self.t})
            self.t += 1

    # -- segments -------------------------------------------------------------
    def _new_va(self, size):
        reuse = self.seg_reuse.get(size)
        if reuse:
            return reuse.pop()
        addr = self.vnext
        self.vnext += round_up(size, LARGE_ROUND) + LARGE_ROUND * (1 + int(self.rng.random() * 3))
        return addr

    def _pool(self, size, stream, pool_id):
        small = size <= SMALL_REQUEST
        key = (stream, small, pool_id)
        pool = self.pools.get(key)
        if pool is None:
            pool = self.pools[key] = Pool(stream, small, pool_id)
        return pool

    def _segment_for(self, pool, size, frames):
        seg = pool.current
        if self.o.expandable and not self.o.legacy:
            granule = SMALL_SEGMENT if pool.small else LARGE_SEGMENT
            if seg is None:
                seg = Segment(self.vnext, 0, pool, [])
                self.vnext += 1 << 36
                pool.segments.append(seg)
                pool.current = seg
            room = seg.total - seg.bump
            if room < size:
                grow = round_up(size - room, granule)
                self.emit('segment_map', seg.addr + seg.total, grow, pool.stream, frames)
                seg.total += grow
            return seg
        if seg is not None and seg.total - seg.bump >= size:
            return seg
        if pool.small:
            total = SMALL_SEGMENT
        elif size < MIN_LARGE_ALLOC:
            total = LARGE_SEGMENT
        else:
            total = round_up(size, LARGE_ROUND)
        addr = self._new_va(total)
        seg_frames = frames if (frames and self.rng.random() < 0.3) else []
        seg = Segment(addr, total, pool, seg_frames)
        pool.segments.append(seg)
        pool.current = seg
        self.emit('segment_alloc', addr, total, pool.stream, frames)
        return seg

    def needs_segment(self, size, stream, pool_id):
        """Whether alloc(size) would write a segment_alloc/segment_map first."""
        pool = self._pool(size, stream, pool_id)
        if any(not b.dead for b in pool.free.get(size, ())):
            return False
        seg = pool.current
        return seg is None or seg.total - seg.bump < size

    def alloc(self, size, frames, stream=0, pool_id=(0, 0)):
        """size is a multiple of 512: block size == requested size."""
        if frames is None:
            frames = []
        elif self.rng.random() < self.fresh_p:
            frames = list(frames)
        pool = self._pool(size, stream, pool_id)
        block = None
        free = pool.free.get(size)
        while free:
            b = free.pop()
            if not b.dead:
                block = b
                break
        if block is None:
            seg = self._segment_for(pool, size, frames)
            block = Block(seg.addr + seg.bump, size, seg)
            seg.bump += size
            seg.blocks.append(block)
        block.state = ALLOCATED
        block.req = size
        block.frames = frames
        block.seg.live += 1
        self.live_bytes += size
        self.emit('alloc', block.addr, size, stream, frames)
        return block

    def free(self, block, frames, defer=False):
        if frames is None:
            frames = []
        elif self.rng.random() < self.fresh_p:
            frames = list(frames)
        stream = block.seg.pool.stream
        self.emit('free_requested', block.addr, block.req, stream, frames)
        block.state = PENDING_FREE
        if defer or self.full():
            self.pending.append(block)
        else:
            self._complete(block, frames)

    def _complete(self, block, frames):
        if frames is None:
            frames = []
        self.emit('free_completed', block.addr, block.req, block.seg.pool.stream, frames)
        block.state = INTERNAL_FREE_STATE
        block.seg.live -= 1
        self.live_bytes -= block.req
        pool = block.seg.pool
        lst = pool.free.get(block.size)
        if lst is None:
            pool.free[block.size] = [block]
        else:
            lst.append(block)

    def complete_pending(self, keep=0):
        frames = self.p.free_site('events')
        while len(self.pending) > keep and not self.full():
            self._complete(self.pending.pop(0), frames)

    def empty_cache(self, frames):
        """Release every segment with no live block (expandable: unmap the
        free tail)."""
        for pool in list(self.pools.values()):
            kept = []
            for seg in pool.segments:
                if self.full():
                    kept.append(seg)
                    continue
                if self.o.expandable and not self.o.legacy:
                    granule = SMALL_SEGMENT if pool.small else LARGE_SEGMENT
                    while seg.blocks and seg.blocks[-1].state == INTERNAL_FREE_STATE:
                        b = seg.blocks.pop()
                        b.dead = True
                        seg.bump = b.addr - seg.addr
                    new_total = round_up(seg.bump, granule)
                    if new_total < seg.total:
                        self.emit('segment_unmap', seg.addr + new_total,
                                  seg.total - new_total, pool.stream, frames)
                        seg.total = new_total
                    kept.append(seg)
                elif seg.live == 0:
                    for b in seg.blocks:
                        b.dead = True
                    self.emit('segment_free', seg.addr, seg.total, pool.stream, frames)
                    self.seg_reuse.setdefault(seg.total, []).append(seg.addr)
                    if pool.current is seg:
                        pool.current = None
                else:
                    kept.append(seg)
            pool.segments = kept

    # -- output ---------------------------------------------------------------
    def segments_out(self):
        legacy = self.o.legacy
        out = []
        segs = [s for pool in self.pools.values() for s in pool.segments if s.total > 0]
        segs.sort(key=lambda s: s.addr)
        for seg in segs:
            blocks = []
            allocated = active = requested = 0
            run = None  # [addr, size, req] of a run of free blocks
            carved = seg.blocks
            for b in carved:
                if b.state == INTERNAL_FREE_STATE:
                    if run is None:
                        run = [b.addr, b.size, b.req]
                    else:
                        run[1] += b.size
                    continue
                if run is not None:
                    blocks.append(self._block(run[0], run[1], run[2], 'inactive', None))
                    run = None
                state = 'active_allocated' if b.state == ALLOCATED else 'active_pending_free'
                blocks.append(self._block(b.addr, b.size, b.req, state, b.frames))
                active += b.size
                requested += b.req
                if b.state == ALLOCATED:
                    allocated += b.size
            tail = seg.total - seg.bump
            if tail > 0:
                if run is None:
                    run = [seg.addr + seg.bump, 0, 0]
                run[1] += tail
            if run is not None:
                blocks.append(self._block(run[0], run[1], run[2], 'inactive', None))
            if legacy:
                d = {'device': self.dev, 'address': seg.addr, 'total_size': seg.total,
                     'allocated_size': allocated, 'active_size': active,
                     'requested_size': requested, 'stream': seg.pool.stream,
                     'segment_type': 'small' if seg.pool.small else 'large',
                     'blocks': blocks}
            else:
                d = {'device': self.dev, 'address': seg.addr, 'total_size': seg.total,
                     'allocated_size': allocated, 'active_size': active,
                     'requested_size': requested, 'stream': seg.pool.stream,
                     'segment_type': 'small' if seg.pool.small else 'large',
                     'segment_pool_id': tuple([seg.pool.pool_id[0], seg.pool.pool_id[1]]),
                     'is_expandable': bool(self.o.expandable),
                     'frames': seg.frames, 'blocks': blocks}
            out.append(d)
        return out

    def _block(self, addr, size, req, state, frames):
        if self.o.legacy:
            history = []
            if frames is not None:
                history = [{'addr': addr, 'real_size': req, 'frames': frames}]
            return {'size': size, 'requested_size': req, 'state': state, 'history': history}
        return {'address': addr, 'size': size, 'requested_size': req, 'state': state,
                'frames': frames if frames is not None else []}


# ---------------------------------------------------------------------------
# The workload.


def log_uniform(rng, lo, hi):
    return int(math.exp(rng.uniform(math.log(lo), math.log(hi))))


def act_size(rng):
    r = rng.random()
    if r < 0.35:
        size = log_uniform(rng, 512, 256 * KiB)
    elif r < 0.85:
        size = log_uniform(rng, 1 * MiB, 48 * MiB)
    else:
        size = log_uniform(rng, 48 * MiB, 160 * MiB)
    return max(BLOCK_ROUND, round_up(size, BLOCK_ROUND))


def batch_scaled(size, scale):
    """Activations and inputs grow with the batch; weights do not. Applied
    after the draw, so scale 1.0 gives the same file as before."""
    if scale == 1.0:
        return size
    return max(BLOCK_ROUND, round_up(int(size * scale), BLOCK_ROUND))


class Workload:
    """A training loop: setup (weights), then iterations of a fixed template
    (so sizes repeat and blocks get reused), marks and ProfilerStep windows."""

    def __init__(self, dev_sim, rng, budget):
        self.d = dev_sim
        self.rng = rng
        p = dev_sim.p
        o = dev_sim.o
        self.n_weights = max(3, min(200, budget // 40))
        self.weights = [(p.weight_site(i), act_size(rng) if rng.random() < 0.8 else
                         max(BLOCK_ROUND, round_up(log_uniform(rng, 512, 64 * KiB), 512)))
                        for i in range(self.n_weights)]
        # forward sites: (frames, size, keep for backward?, pool_id)
        self.fwd_sites = []
        subs = [('attention', [52, 55, 58, 61, 66, 70], ['linear', 'softmax', 'matmul', 'add']),
                ('mlp', [23, 24, 25], ['linear', 'gelu']),
                ('rotary', [17, 19], ['matmul', 'add']),
                ('block', [48, 50], ['norm', 'add'])]
        if getattr(o, 'sites', 0):
            subs = []
            for k in range(o.sites):
                self.fwd_sites.append((p.layer_site(k),
                                       batch_scaled(act_size(rng), getattr(o, "batch_scale", 1.0)),
                                       rng.random() < 0.55, (0, 0)))
        for sub, lines, leaves in subs:
            for line in lines:
                for leaf in leaves:
                    pool_id = (0, 0)
                    if o.graph_pool and rng.random() < 0.3:
                        pool_id = (0, 1 + int(rng.random() * 2))
                    self.fwd_sites.append((p.forward_site(sub, line, leaf),
                                           batch_scaled(act_size(rng), getattr(o, "batch_scale", 1.0)),
                                           rng.random() < 0.55, pool_id))
        self.data_sites = [(p.data_site(i), batch_scaled(act_size(rng), getattr(o, "batch_scale", 1.0)))
                           for i in range(2)]
        self.loss_site = p.loss_site()
        self.bwd_sites = [p.backward_site(i) for i in range(6)]
        self.opt_state_sites = [p.optimizer_site(i, 'state') for i in range(2)]
        self.opt_tmp_sites = [p.optimizer_site(i, 'tmp') for i in range(4)]
        self.comm_sites = [p.comm_site(i) for i in range(2)]
        self.free_fwd = [p.free_site('fwd', i) for i in range(3)]
        self.free_bwd = [p.free_site('bwd', i) for i in range(3)]
        self.free_opt = p.free_site('opt')
        self.free_data = p.free_site('data')
        self.free_zero = p.free_site('zero')
        self.persistent = []
        self.template_seed = rng.random()

    # Template ops: ('a', slot, frames, size, stream, pool_id) | ('f', slot, frames, defer)
    #               | ('m', name, stage) | ('g', gap_us)
    def build_template(self, target_events, first, seed):
        rng = random.Random('%s/%d' % (self.template_seed, seed))
        o = self.d.o
        ops = []
        n = [0]
        slot_counter = [0]

        def new_slot():
            slot_counter[0] += 1
            return slot_counter[0]

        def A(frames, size, stream=0, pool_id=(0, 0)):
            s = new_slot()
            ops.append(('a', s, frames, size, stream, pool_id))
            n[0] += 1
            return s

        def F(slot, frames, defer=False):
            ops.append(('f', slot, frames, defer))
            n[0] += 2

        def M(name, stage):
            if o.marks:
                ops.append(('m', name, stage))

        ops.append(('g', 2000 + int(rng.random() * 20000)))
        M('Optimizer.zero_grad#AdamW.zero_grad', 'START')
        M('Optimizer.zero_grad#AdamW.zero_grad', 'END')
        M('enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__', 'START')
        batch = [A(fr, sz) for fr, sz in self.data_sites]
        M('enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__', 'END')
        # --bridge: Megatron Bridge's marks (its FSDP wrapper, FusedAdam)
        bridge = getattr(o, 'bridge', False)
        if bridge:
            M('CustomFSDP.forward', 'START')
        # forward
        per_item = 3.2
        m = max(2, int(target_events * 0.8 / (per_item * 2)))
        # --sites: every module about as often (a real model runs them all)
        weights = [1.0 if getattr(o, 'sites', 0) else 1.0 / (1 + i) ** 0.7
                   for i in range(len(self.fwd_sites))]
        picks = rng.choices(range(len(self.fwd_sites)), weights=weights, k=m)
        acts = []
        temps = []
        for k in picks:
            frames, size, keep, pool_id = self.fwd_sites[k]
            s = A(frames, size, 0, pool_id)
            if keep:
                acts.append((s, size))
            else:
                temps.append(s)
                if len(temps) > 1 + int(rng.random() * 2):
                    F(temps.pop(0), self.free_fwd[k % 3], defer=rng.random() < 0.04)
        while temps:
            F(temps.pop(0), self.free_fwd[0])
        if bridge:
            M('CustomFSDP.forward', 'END')
        loss = A(self.loss_site, 512)
        # backward
        for i, (s, size) in enumerate(reversed(acts)):
            g = A(self.bwd_sites[i % len(self.bwd_sites)], size)
            F(s, self.free_bwd[i % 3], defer=rng.random() < 0.05)
            F(g, self.free_bwd[(i + 1) % 3])
        F(loss, self.free_bwd[0])
        if first:
            for i, (_, size) in enumerate(self.weights):
                ops.append(('p', self.bwd_sites[(i + 3) % len(self.bwd_sites)], size))
                n[0] += 1
        if o.marks:
            M('nccl:all_reduce', 'START')
            bucket = [A(self.comm_sites[i % 2], 25 * MiB, SIDE_STREAM) for i in range(2)]
            for s in bucket:
                F(s, self.free_opt, defer=True)
            M('nccl:all_reduce', 'END')
        # optimizer
        optimizer_mark = 'Optimizer.step#FusedAdam.step' if bridge else 'Optimizer.step#AdamW.step'
        M(optimizer_mark, 'START')
        if first:
            for i, (_, size) in enumerate(self.weights):
                for j in range(2):
                    ops.append(('p', self.opt_state_sites[j], size))
                    n[0] += 1
        chunk = max(1, len(self.weights) // 4)
        for j in range(min(4, len(self.weights))):
            size = sum(sz for _, sz in self.weights[j * chunk:(j + 1) * chunk]) or 512
            t = A(self.opt_tmp_sites[j], round_up(min(size, 256 * MiB), 512))
            F(t, self.free_opt)
        M(optimizer_mark, 'END')
        for s in batch:
            F(s, self.free_data)
        ops.append(('c',))   # complete what is still pending
        return ops, n[0]

    def setup(self):
        for frames, size in self.weights:
            self.persistent.append(self.d.alloc(size, frames))

    def run_iteration(self, template):
        """Runs one iteration; False when the event budget ran out in it."""
        d = self.d
        slots = {}
        alloc = d.alloc
        free = d.free
        full = d.full
        opts = d.o
        trace = d.trace
        for op in template:
            if len(trace) + 1 >= d.limit:
                if full():
                    return False
                # one entry left: an alloc that needs a new segment would
                # write two, so end with a lone free_requested instead
                if ((op[0] == 'a' and d.needs_segment(op[3], op[4], op[5]))
                        or (op[0] == 'p' and d.needs_segment(op[2], 0, (0, 0)))):
                    victims = list(slots.values()) or self.persistent
                    if victims:
                        d.free(victims[-1], self.free_zero)
                    return False
            kind = op[0]
            if kind == 'a':
                slots[op[1]] = alloc(op[3], op[2], op[4], op[5])
            elif kind == 'f':
                free(slots.pop(op[1]), op[2], op[3])
                if d.pending and not op[3] and self.rng.random() < 0.5:
                    d.complete_pending(keep=1)
            elif kind == 'p':
                self.persistent.append(alloc(op[2], op[1]))
            elif kind == 'm':
                d.annotate(op[1], op[2])
            elif kind == 'g':
                d.t += op[1]
            elif kind == 'c':
                d.complete_pending()
        if opts.odd_actions and self.rng.random() < 0.3:
            d.record_plain('snapshot', d.live_bytes)
            d.record_plain('user_defined', 0, user_metadata='checkpoint')
        if self.rng.random() < 0.1 and not full():
            d.empty_cache(self.free_zero)
        return True


# ---------------------------------------------------------------------------


def simulate_device(dev, opts, budget, vbase, t0):
    rng = random.Random('%d/%d' % (opts.seed, dev))
    program = Program(random.Random('%d/program' % opts.seed), opts.stacks, opts.legacy)
    d = Device(dev, opts, program, rng, vbase, t0)
    w = Workload(d, rng, budget)
    if opts.late_start:
        d.recording = False
    d.limit = 1 << 62
    w.setup()
    d.complete_pending()
    if opts.late_start:
        d.record_start_live = d.live_bytes
    d.recording = True
    used = len(d.trace)
    d.limit = budget - (1 if (opts.oom and dev == opts.oom_device) else 0)
    if budget <= 0:
        d.limit = 0
    steps = opts.steps if d.timed else 0
    remaining = max(1, d.limit - used)
    if steps > 0:
        per_iter = max(8, remaining // steps)
    else:
        per_iter = max(8, min(remaining // 3, 4000))
    # size the templates so that the iterations fill the budget: the first
    # iteration also allocates gradients and optimizer state
    first_ops, n_first = w.build_template(per_iter, first=True, seed=0)
    if steps > 1:
        target = max(8, (remaining - n_first) // (steps - 1))
    else:
        target = per_iter
    _, n_regular = w.build_template(target, first=False, seed=1)
    ops, _ = w.build_template(max(8, int(target * target * 0.97) // max(1, n_regular)),
                              first=False, seed=1)
    # --sites: iterations cycle through 16 templates (other inputs take other
    # paths through the model), so the run reaches thousands of stacks.
    cycle = [ops]
    if getattr(opts, 'sites', 0):
        for j in range(15):  # each sized like the first, so the steps fill the budget alike
            _, n_j = w.build_template(target, first=False, seed=2 + j)
            cycle.append(w.build_template(max(8, int(target * target * 0.97) // max(1, n_j)),
                                          first=False, seed=2 + j)[0])
    it = 0
    while not d.full():
        step = it if it < steps else None
        if step is not None and not opts.bridge:
            d.annotate('ProfilerStep#%d' % step, 'START')
        ops = cycle[it % len(cycle)]
        done = w.run_iteration(first_ops if it == 0 else ops)
        # the last step takes whatever budget is left (more micro-batches),
        # so that all events after the first step's start are inside a step
        while done and step is not None and step == steps - 1 and not d.full():
            done = w.run_iteration(ops)
        if step is not None and not opts.bridge and (done or not opts.open_last_step):
            d.annotate('ProfilerStep#%d' % step, 'END')
        if not done:
            break
        it += 1
    if opts.oom and dev == opts.oom_device:
        frames = program.oom_site()
        entry = {'action': 'oom', 'device_free': 95682560 + 512 * int(rng.random() * 1000),
                 'size': 5308694528, 'stream': 0}
        if d.timed:
            d.t += 5
            entry['time_us'] = d.t
            entry['compile_context'] = 'N/A'
        entry['frames'] = frames
        d.trace.append(entry)
    # expected baseline (live bytes before the first kept entry)
    baseline = d.record_start_live
    if opts.ring_buffer and len(d.trace) > opts.ring_buffer:
        cut = len(d.trace) - opts.ring_buffer
        baseline += replay_delta(d.trace[:cut])
        d.trace = d.trace[cut:]
    return d, baseline


def replay_delta(entries):
    live = {}
    delta = 0
    for e in entries:
        a = e['action']
        if a == 'alloc':
            live[e['addr']] = e['size']
            delta += e['size']
        elif a == 'free_completed':
            delta -= live.pop(e['addr'], e['size'])
    return delta


ROUNDUP_KEYS = [str(1 << i) for i in range(16)]


def allocator_settings(opts):
    return {
        'PYTORCH_CUDA_ALLOC_CONF': 'expandable_segments:True' if opts.expandable else '',
        'max_split_size': -1,
        'garbage_collection_threshold': 0.0,
        'expandable_segments': bool(opts.expandable),
        'pinned_num_register_threads': 1,
        'release_lock_on_cudamalloc': False,
        'pinned_use_cuda_host_register': False,
        'roundup_power2_divisions': {k: 0 for k in ROUNDUP_KEYS},
    }


def extras(protocol):
    """Values exercising the generic dump: every scalar edge the pickle
    opcodes can express in this protocol without importing anything."""
    shared = {'k': [1, 2], 'pool': (0, 0)}
    x = {
        'ints': [0, 1, -1, 255, 256, 65535, 65536, 2 ** 31 - 1, 2 ** 31, -2 ** 31,
                 -2 ** 31 - 1, 2 ** 32, 2 ** 63 - 1, 2 ** 63, -2 ** 63, 2 ** 64 - 1,
                 2 ** 64, -2 ** 63 - 1, 10 ** 30, -10 ** 30, 2 ** 2000,
                 # wider than CPython's default 4,300-digit str() limit
                 2 ** 40000 + 12345, -(3 ** 20000), -(2 ** 32767)],
        'floats': [0.0, -0.0, 0.1, 1.5, -2.25, 1e300, 5e-324, 1e16, 123456789.125,
                   float('nan'), float('inf'), float('-inf')],
        'strings': ['', 'plain', 'quote " backslash \\ slash /',
                    'control \x00\x01\x1f\x7f \t\n\r', 'unicode \u00e9 \u00fc \u6a21\u578b \U0001f600',
                    'x' * 300, '\u2028\u2029'],
        'tuples': [(), (1,), (1, 2), (1, 2, 3), (1, 2, 3, 4), ((0, 0),), ([],)],
        'nested': {'a': [[], {}, [[1]], {'b': {'c': [None]}}]},
        'shared': [shared, shared, [shared]],
        'consts': [True, False, None],
        'non_str_keys': {1: 'one', (0, 1): 'pool', 's': 2, None: 3, 2.5: 'f', -7: [1]},
        'int_keys_only': {0: 0, 1: 1},
        'empty': [{}, [], ()],
    }
    if protocol >= 3:
        x['bytes'] = [b'', b'\x00\xffabc', bytes(range(256))]
    if protocol >= 4:
        # members whose hashes do not depend on PYTHONHASHSEED (no str, no
        # None), so that the bytes are the same on every run
        x['sets'] = [set(), {3, 1, 2, 2 ** 40, -7, 2.5}, frozenset(),
                     frozenset({(1, 2), 3, (0, (1,))})]
    if protocol >= 5:
        x['bytearray'] = [bytearray(b'\x01\x02'), bytearray()]
    return x


def build_snapshot(opts):
    """Returns (object to pickle, manifest dict)."""
    n_dev = max(1, opts.devices)
    if opts.big_addresses:
        base = (1 << 63) + 0x7F12_0000_0000
    elif opts.negative_addresses:
        base = -(1 << 63) + 0x7F12_0000_0000    # int64 view of >= 2**63, as the C++ writer
    else:
        base = 0x7F12_0000_0000
    trng = random.Random('%d/time' % opts.seed)
    t0 = 1_730_000_000_000_000 + trng.randrange(10 ** 13)
    devices = []
    baselines = []
    if not opts.empty:
        total = max(0, opts.events)
        for dev in range(n_dev):
            budget = total // n_dev + (1 if dev < total % n_dev else 0)
            d, baseline = simulate_device(dev, opts, budget, base + dev * (1 << 40),
                                          t0 + dev * 137)
            devices.append(d)
            baselines.append(baseline)
    segments = []
    for d in devices:
        segments.extend(d.segments_out())
    traces = [d.trace for d in devices] if devices else [[] for _ in range(n_dev)]
    while len(traces) < n_dev:
        traces.append([])
    manifest = {'devices': n_dev, 'events': [len(t) for t in traces],
                'baseline': baselines if devices else [0] * n_dev}
    if opts.top_level_list:
        active = [sum(s['active_size'] for s in segments if s['device'] == dev)
                  for dev in range(n_dev)]
        manifest['baseline'] = active
        manifest['events'] = [0] * n_dev
        return segments, manifest
    snap = {'segments': segments, 'device_traces': traces}
    if not opts.legacy:
        snap['allocator_settings'] = allocator_settings(opts)
        anns = []
        for d in devices:
            anns.extend(d.annotations)
        anns.sort(key=lambda a: a['time_us'])
        if not opts.no_time:
            snap['external_annotations'] = anns
    if opts.extras:
        snap['memsnap_test_extras'] = extras(opts.protocol)
    return snap, manifest


def write_snapshot(opts, path):
    obj, manifest = build_snapshot(opts)
    write_object(obj, path, opts.protocol, opts.gzip)
    return manifest


# ---------------------------------------------------------------------------
# Replicating a real snapshot (--replicate FIXTURE): a real allocator history,
# repeated until the trace has --events entries.

# Trace actions whose 'addr' is a device address (shifted per repetition);
# 'oom' and 'snapshot' entries keep theirs.
ADDRESS_ACTIONS = frozenset(('alloc', 'free_requested', 'free_completed', 'segment_alloc',
                             'segment_free', 'segment_map', 'segment_unmap'))
ADDRESS_GRANULE = 1 << 40   # repetitions are this many bytes (or a multiple) apart
MAX_ADDRESS = (1 << 63) - 1


class ReplicateError(Exception):
    pass


class GlobalRefused(pickle.UnpicklingError):
    pass


class DataOnlyUnpickler(pickle.Unpickler):
    """Loads only data: any opcode that would import a global (and so could
    call code) is refused, as memsnap refuses it."""

    def find_class(self, module, name):
        raise GlobalRefused(
            'the pickle needs the global %s.%s; --replicate reads only data-only pickles '
            '(dicts, lists, strings, numbers), as torch.cuda.memory._dump_snapshot writes them'
            % (module, name))


def load_fixture(path):
    """(snapshot object, the file's pickle protocol or None)."""
    with open(path, 'rb') as f:
        magic = f.read(4)
    if magic.startswith(b'\x28\xb5\x2f\xfd'):
        raise ReplicateError('%s: zstd-compressed; decompress it first (zstd -d)' % path)
    opener = gzip.open if magic.startswith(b'\x1f\x8b') else open
    try:
        with opener(path, 'rb') as f:
            head = f.read(2)
            f.seek(0)
            snap = DataOnlyUnpickler(f).load()
    except GlobalRefused as e:
        raise ReplicateError('%s: %s' % (path, e))
    except (pickle.UnpicklingError, EOFError, OSError, ValueError, TypeError, IndexError,
            KeyError, MemoryError) as e:
        raise ReplicateError('%s: not a readable pickle: %s: %s' % (path, type(e).__name__, e))
    protocol = head[1] if len(head) == 2 and head[0] == 0x80 else None
    return snap, protocol


def fresh_str(s):
    """An equal str that is another object, so that pickle writes it again
    (as PyTorch writes a new 'N/A' per entry) instead of a memo reference."""
    return s.encode('utf-8', 'surrogatepass').decode('utf-8', 'surrogatepass')


def shift_segment(segment, delta):
    out = dict(segment)    # same key order; frames and other values stay shared
    out['address'] = segment['address'] + delta
    blocks = segment.get('blocks')
    if isinstance(blocks, list):
        shifted = []
        for block in blocks:
            b = dict(block)
            if type(b.get('address')) is int:
                b['address'] += delta
            shifted.append(b)
        out['blocks'] = shifted
    return out


# Dump blocks the program still holds: the close-out frees them.
LIVE_BLOCK_STATES = ('active_allocated', 'active_pending_free')


def closeout_plan(own):
    """The entries with which the allocator would release everything the
    device's dump holds, as if the program freed every tensor and then
    called torch.cuda.empty_cache(): each block that is allocated or
    awaiting free, in address order, gets a free_requested and a
    free_completed (a block awaiting free only the free_completed); then each
    segment is returned, a segment_free of its whole size, or for an
    expandable segment a segment_unmap of its mapped range (what the dump
    lists as a segment), as PyTorch unmaps the free pages of an expandable
    segment. A block without an address (PyTorch 2.0) is placed after its
    predecessor, as its segment lays the blocks out.

    Returns [(action, addr, size, stream, segment, group)]: the entries of one
    group share one frames list, as one call's context does in PyTorch's
    files (a block's two frees; all the segments of one empty_cache)."""
    frees, releases = [], []
    for seg in sorted(own, key=lambda s: s['address']):
        stream = seg.get('stream') if type(seg.get('stream')) is int else 0
        at = seg['address']
        blocks = seg.get('blocks')
        for b in blocks if isinstance(blocks, list) else ():
            if not isinstance(b, dict):
                continue
            size = b.get('size') if type(b.get('size')) is int else 0
            addr = b.get('address') if type(b.get('address')) is int else at
            at = addr + size
            state = b.get('state')
            if state not in LIVE_BLOCK_STATES:
                continue
            # PyTorch's free entries carry the block's requested size, as its alloc did
            req = b.get('requested_size') if type(b.get('requested_size')) is int else size
            frees.append((addr, state == 'active_allocated', req, stream, seg))
        releases.append(('segment_unmap' if seg.get('is_expandable') is True else 'segment_free',
                         seg['address'], seg['total_size'], stream, seg, -1))
    plan = []
    for group, (addr, allocated, req, stream, seg) in enumerate(sorted(frees, key=lambda f: f[0])):
        if allocated:
            plan.append(('free_requested', addr, req, stream, seg, group))
        plan.append(('free_completed', addr, req, stream, seg, group))
    return plan + releases


def _pool(value):
    """A pool id as a tuple; none given is the default pool (0, 0), as memsnap reads it."""
    return tuple(value) if isinstance(value, (list, tuple)) else (0, 0)


def pre_trace_state(source, own):
    """What the allocator held before the device's trace began: the dump's
    segments and live blocks, walked back through the trace (as memsnap's
    replay walks it). Returns (ranges, blocks): ranges {address: [size,
    stream, pool, expandable]} (what the allocator had mapped: a
    segment, or an expandable segment's adjacent mapped pages of one stream
    and pool as one range, as memsnap joins them); blocks {address:
    [requested size, allocated]} (allocated, or awaiting free when False).
    An entry that does not fit (a misfit) changes nothing."""
    starts, ranges, blocks = [], {}, {}

    def owner(r):
        return (r[1], r[2])

    def containing(addr):
        i = bisect.bisect_right(starts, addr) - 1
        return starts[i] if i >= 0 and addr < starts[i] + ranges[starts[i]][0] else None

    def add(addr, size, stream, pool, expandable):
        i = bisect.bisect_left(starts, addr)
        if i < len(starts) and starts[i] < addr + size:
            return
        if i > 0 and starts[i - 1] + ranges[starts[i - 1]][0] > addr:
            return
        r = [size, stream, pool, expandable]
        if expandable and i < len(starts) and starts[i] == addr + size:
            nxt = ranges[starts[i]]
            if nxt[3] and owner(nxt) == owner(r):
                r[0] += nxt[0]
                del ranges[starts[i]], starts[i]
        if expandable and i > 0:
            prev = ranges[starts[i - 1]]
            if prev[3] and owner(prev) == owner(r) and starts[i - 1] + prev[0] == addr:
                prev[0] += r[0]
                return
        starts.insert(i, addr)
        ranges[addr] = r

    def remove(addr, size):
        at = containing(addr)
        if at is None or addr + size > at + ranges[at][0]:
            return
        r = ranges.pop(at)
        i = bisect.bisect_left(starts, at)
        del starts[i]
        if at < addr:
            starts.insert(i, at)
            ranges[at] = [addr - at] + r[1:]
            i += 1
        if addr + size < at + r[0]:
            starts.insert(i, addr + size)
            ranges[addr + size] = [at + r[0] - addr - size] + r[1:]
        for b in [b for b in blocks if addr <= b < addr + size]:
            del blocks[b]

    for seg in own:
        stream = seg.get('stream') if type(seg.get('stream')) is int else 0
        add(seg['address'], seg['total_size'], stream, _pool(seg.get('segment_pool_id')),
            seg.get('is_expandable') is True)
        at = seg['address']
        for b in seg.get('blocks') if isinstance(seg.get('blocks'), list) else ():
            if not isinstance(b, dict):
                continue
            size = b.get('size') if type(b.get('size')) is int else 0
            addr = b.get('address') if type(b.get('address')) is int else at
            at = addr + size
            if b.get('state') in LIVE_BLOCK_STATES:
                req = b.get('requested_size') if type(b.get('requested_size')) is int else size
                blocks[addr] = [req, b.get('state') == 'active_allocated']
    for e in reversed(source):
        action, addr, size = e.get('action'), e.get('addr'), e.get('size')
        if action not in ADDRESS_ACTIONS or type(addr) is not int:
            continue
        size = size if type(size) is int else 0
        if action == 'alloc':
            blocks.pop(addr, None)
        elif action == 'free_requested':
            if addr in blocks:
                blocks[addr][1] = True
        elif action == 'free_completed':
            if addr not in blocks and containing(addr) is not None:
                blocks[addr] = [size, False]
        elif action in ('segment_alloc', 'segment_map'):
            remove(addr, size)
        else:   # segment_free, segment_unmap
            stream = e.get('stream') if type(e.get('stream')) is int else 0
            add(addr, size, stream, _pool(e.get('pool_id')), action == 'segment_unmap')
    return ranges, blocks


def opening_plan(ranges, blocks):
    """The entries with which the allocator would come to hold the pre-trace
    state (pre_trace_state) from nothing, mirroring closeout_plan: a
    segment_alloc of each range (a segment_map for an expandable one), in
    address order; then each block, in address order, an alloc of its
    requested size (the replay derives its size with the split rule) and,
    for a block awaiting free, a free_requested. A block outside every range
    is left out.

    Returns [(action, addr, size, stream, pool, group)], as
    closeout_plan (group -1: the ranges, one call's context)."""
    plan = []
    for addr in sorted(ranges):
        size, stream, pool, expandable = ranges[addr]
        plan.append(('segment_map' if expandable else 'segment_alloc', addr, size, stream,
                     pool, -1))
    starts = sorted(ranges)
    for group, addr in enumerate(sorted(blocks)):
        i = bisect.bisect_right(starts, addr) - 1
        if i < 0 or addr >= starts[i] + ranges[starts[i]][0]:
            continue
        _, stream, pool, _ = ranges[starts[i]]
        req, allocated = blocks[addr]
        plan.append(('alloc', addr, req, stream, pool, group))
        if not allocated:
            plan.append(('free_requested', addr, req, stream, pool, group))
    return plan


def replicate_snapshot(path, events, shared_frame_lists=False, stream=False):
    """The fixture's busiest device trace repeated until it has `events`
    entries, each repetition in its own address range and after the previous
    one in time, every repetition but the last closed out by entries that
    release what the dump holds, every one but the first opened by entries
    that create what the fixture held before its trace began, and the dump
    (segments) of that device the last repetition's.
    shared_frame_lists: every repetition uses the fixture's frame list
    objects (and the close-outs one list per call), so that pickle writes a
    later repetition's list as a memo reference; by default each repetition
    has its own lists (of the shared frame dicts; lists shared inside the
    fixture stay shared inside each repetition), as a long real run has them.
    stream: the device's trace is a StreamedList, each repetition made only
    when write_object writes it (see StreamingPickler).

    Returns (snapshot object, pickle protocol of the fixture or None, manifest)."""
    snap, protocol = load_fixture(path)
    if not isinstance(snap, dict) or not isinstance(snap.get('device_traces'), list):
        raise ReplicateError('%s: no device_traces list (a segments-only dump, or not a '
                             'memory snapshot)' % path)
    traces = snap['device_traces']
    lengths = [len(t) if isinstance(t, list) else 0 for t in traces]
    if not lengths or max(lengths) == 0:
        raise ReplicateError('%s: every device trace is empty (recorded without '
                             '_record_memory_history): nothing to replicate' % path)
    device = lengths.index(max(lengths))
    source = traces[device]
    if not all(isinstance(e, dict) for e in source):
        raise ReplicateError('%s: device %d has trace entries that are not dicts' % (path, device))
    segments = snap.get('segments')
    segments = segments if isinstance(segments, list) else []

    def on_device(s):
        return isinstance(s, dict) and s.get('device', 0) == device

    own = [s for s in segments if on_device(s)]
    for s in own:
        if type(s.get('address')) is not int or type(s.get('total_size')) is not int:
            raise ReplicateError('%s: a segment of device %d has no integer address/total_size'
                                 % (path, device))

    # Address range of the device: trace addresses and the dump's segments.
    lo, hi = None, None
    for e in source:
        a = e.get('addr')
        if e.get('action') in ADDRESS_ACTIONS and type(a) is int:
            end = a + max(0, e.get('size', 0) if type(e.get('size')) is int else 0)
            lo = a if lo is None else min(lo, a)
            hi = end if hi is None else max(hi, end)
    for s in own:
        lo = s['address'] if lo is None else min(lo, s['address'])
        end = s['address'] + s['total_size']
        hi = end if hi is None else max(hi, end)
    if lo is None:
        lo = hi = 0
    if lo < 0:
        raise ReplicateError('%s: negative (int64) addresses are not supported' % path)
    stride = max(ADDRESS_GRANULE, round_up(hi - lo, ADDRESS_GRANULE))

    closeout = closeout_plan(own)
    opening = opening_plan(*pre_trace_state(source, own))
    n_source, n_close, n_open = len(source), len(closeout), len(opening)

    # Time period: the trace and the device's annotations, plus one mean gap
    # per close-out and opening entry and one more between the two.
    anns = snap.get('external_annotations')
    own_anns, other_anns = [], []
    if isinstance(anns, list):
        for a in anns:
            if (isinstance(a, dict) and a.get('device', device) == device
                    and type(a.get('time_us')) is int):
                own_anns.append(a)
            else:
                other_anns.append(a)
    times = [e['time_us'] for e in source if type(e.get('time_us')) is int]
    period, gap, first_time, last_time = 0, 0, 0, 0
    if times:
        span_times = times + [a['time_us'] for a in own_anns]
        gap = max(1, (max(times) - min(times)) // max(1, len(times) - 1))
        period = max(span_times) - min(span_times) + gap * (n_close + n_open + 1)
        first_time, last_time = min(times), max(times)

    # Repetitions: each is its opening, the fixture's trace and its close-out;
    # the last has no close-out, and the first is cut to what is left of N,
    # from its start (what a wrapped ring buffer keeps: it still ends in the
    # state the dump describes, and released; cut past its opening, as it is
    # unless N is small, the state before it is the fixture's at the cut).
    events = max(1, events)
    full = n_open + n_source + n_close
    if events <= n_open + n_source:
        reps, first = 1, events
    else:
        reps = 2 + max(0, -(-(events - n_open - n_source - full) // full))
        first = events - n_open - n_source - (reps - 2) * full   # 1..full
    if hi + (reps - 1) * stride > MAX_ADDRESS:
        raise ReplicateError('%s: %d repetitions %#x apart would pass 2**63' % (path, reps, stride))

    # Strings that only one entry holds are written once per entry in the
    # fixture (PyTorch makes a new 'N/A' each time): copy them per repetition.
    # Frame dicts are shared, as in the fixture, so pickle memoizes them once
    # for the whole file; frame lists are new per repetition unless shared.
    holders = {}
    for e in source:
        for v in e.values():
            if type(v) is str and len(v) > 1:
                holders[id(v)] = holders.get(id(v), 0) + 1

    def fresh_keys(e):
        return tuple(k for k, v in e.items()
                     if type(v) is str and len(v) > 1 and holders[id(v)] == 1)

    plan = []
    for e in source:
        shift_addr = e.get('action') in ADDRESS_ACTIONS and type(e.get('addr')) is int
        shift_time = type(e.get('time_us')) is int
        frames = not shared_frame_lists and type(e.get('frames')) is list
        plan.append((e, shift_addr, shift_time, fresh_keys(e), frames))

    # The close-out's entries: the keys (and other values) of the fixture's
    # last allocator entry; the frames of its last free (of its last segment
    # release for the releases), in a new list per call.
    template = next((e for e in reversed(source) if e.get('action') in ADDRESS_ACTIONS), source[-1])
    template_fresh = fresh_keys(template)
    template_time = type(template.get('time_us')) is int
    template_frames = 'frames' in template

    def last_frames(actions):
        e = next((e for e in reversed(source)
                  if e.get('action') in actions and type(e.get('frames')) is list), None)
        return e['frames'] if e is not None else None

    free_frames = last_frames(('free_requested', 'free_completed'))
    if free_frames is None:
        free_frames = template['frames'] if type(template.get('frames')) is list else []
    release_frames = last_frames(('segment_free', 'segment_unmap'))
    if release_frames is None:
        release_frames = free_frames
    pool_key = 'pool_id' in template
    shared_lists = {}

    # The opening's: the same keys; the frames of the fixture's last alloc
    # (of its last segment_alloc or segment_map for the ranges).
    alloc_frames = last_frames(('alloc',))
    if alloc_frames is None:
        alloc_frames = free_frames
    create_frames = last_frames(('segment_alloc', 'segment_map'))
    if create_frames is None:
        create_frames = alloc_frames
    shared_open_lists = {}

    def made(rows, da, t0, lists, frames_for, pool_for):
        """Entries on the template's keys from (action, addr, size, stream,
        extra, group) rows, one mean gap apart after t0; `group` shares a
        frames list (frames_for(group) copied, once per group in `lists`),
        pool_for(extra) is the pool (None: the template's)."""
        out = []
        for j, (action, addr, size, stream, extra, group) in enumerate(rows):
            c = dict(template)
            c['action'] = action
            c['addr'] = addr + da
            c['size'] = size
            c['stream'] = stream
            if template_time:
                c['time_us'] = t0 + (j + 1) * gap
            if template_frames:
                frames = lists.get(group)
                if frames is None:
                    frames = lists[group] = list(frames_for(group))
                c['frames'] = frames
            pool = pool_for(extra)
            if pool_key and pool is not None:
                kind = type(template['pool_id'])   # the fixture's pool_id type
                c['pool_id'] = (kind if kind in (list, tuple) else tuple)(pool)
            for key in template_fresh:
                c[key] = fresh_str(c[key])
            out.append(c)
        return out

    def open_(k):
        """Repetition k's opening entries, one mean gap apart, the last one
        gap before the repetition's first entry."""
        return made(opening, k * stride, first_time + k * period - (n_open + 1) * gap,
                    shared_open_lists if shared_frame_lists else {},
                    lambda group: create_frames if group < 0 else alloc_frames,
                    lambda pool: pool)

    def close(k):
        """Repetition k's close-out entries."""
        def pool_for(seg):
            pool = seg.get('segment_pool_id')
            return pool if isinstance(pool, (list, tuple)) else None
        return made(closeout, k * stride, last_time + k * period,
                    shared_lists if shared_frame_lists else {},
                    lambda group: release_frames if group < 0 else free_frames, pool_for)

    def repetition(k):
        """Repetition k's entries (k >= 1): its opening, the fixture's trace
        moved, and its close-out unless it is the last."""
        if k == 0:
            if reps == 1:
                return (open_(0)[n_open + n_source - first:] if first > n_source else []) \
                    + source[max(0, n_source - first):]
            if first > n_source + n_close:
                return open_(0)[full - first:] + source + close(0)
            if first > n_close:
                return source[n_source + n_close - first:] + close(0)
            return close(0)[n_close - first:]
        da, dt = k * stride, k * period
        entries = open_(k)
        append = entries.append
        lists = {}   # id of a fixture frame list -> its copy in this repetition
        for e, shift_addr, shift_time, fresh, frames in plan:
            c = dict(e)
            if frames:
                copy = lists.get(id(e['frames']))
                if copy is None:
                    copy = lists[id(e['frames'])] = list(e['frames'])
                c['frames'] = copy
            if shift_addr:
                c['addr'] += da
            if shift_time:
                c['time_us'] += dt
            for key in fresh:
                c[key] = fresh_str(c[key])
            append(c)
        if k < reps - 1:
            entries.extend(close(k))
        return entries

    if stream:
        trace = StreamedList(events, [lambda k=k: repetition(k) for k in range(reps)],
                             reachable_ids(snap))
    else:
        trace = []
        for k in range(reps):
            trace.extend(repetition(k))

    # The dump is the last repetition's: the device's segments, shifted.
    last = (reps - 1) * stride
    out_segments, placed = [], False
    for s in segments:
        if not on_device(s):
            out_segments.append(s)
        elif not placed:
            placed = True
            out_segments.extend(own if last == 0 else [shift_segment(x, last) for x in own])

    out = {}
    for key, value in snap.items():
        if key == 'segments':
            out[key] = out_segments
        elif key == 'device_traces':
            out[key] = [trace if d == device else t for d, t in enumerate(traces)]
        elif key == 'external_annotations' and isinstance(value, list):
            copies = list(other_anns)
            for k in range(reps):
                for a in own_anns:
                    if k == 0:
                        copies.append(a)
                    else:
                        c = dict(a)
                        c['time_us'] += k * period
                        copies.append(c)
            if all(isinstance(a, dict) and type(a.get('time_us')) is int for a in copies):
                copies.sort(key=lambda a: a['time_us'])
            out[key] = copies
        else:
            out[key] = value
    manifest = {'fixture': os.path.basename(path), 'device': device,
                'shared_frame_lists': bool(shared_frame_lists),
                'fixture_entries': n_source, 'closeout_entries': n_close,
                'opening_entries': n_open,
                'events': [len(t) for t in out['device_traces']],
                'repetitions': reps, 'first_repetition_entries': first,
                'address_stride': stride, 'time_period_us': period,
                'dump_shift': last, 'segments': len(out_segments),
                'device_segments': len(own)}
    return out, protocol, manifest


class StreamedList:
    """A list too long to hold: `count` items, made part by part by the
    callables `parts` (each returns a list) as StreamingPickler writes them.
    `keep`: the ids of the objects the parts share, alive while the list is
    (for --replicate, everything in the fixture)."""

    def __init__(self, count, parts, keep):
        self.count = count
        self.parts = parts
        self.keep = keep

    def __len__(self):
        return self.count


class StreamingPickler(pickle._Pickler):
    """Writes an object that holds StreamedLists without holding their items.

    Every object pickle memoizes is also kept alive by the pickler's memo (so
    that its id cannot be reused), so a list of 50M entries cannot be written
    by one pickle.dump on a 24 GiB machine. Here each part of a StreamedList
    is pickled by CPython's C pickler with a memo that holds only what the
    file still refers to: the memo of everything written before the list
    and the objects a part memoized that outlive it (for --replicate, the
    fixture's frame dicts and strings, which every repetition shares), never
    a part's own entries. That takes explicit memo numbers (protocol 2 and 3's
    BINPUT): a part's objects reuse the numbers of the part before, which no
    later opcode refers to; protocol 4's MEMOIZE numbers each object by how
    many came before, so its memo could never drop one. Everything else goes
    through this (pure Python) pickler, slow but small here.

    Each part is pickled as a list; its PROTO, EMPTY_LIST and BINPUT (the
    part's own list) and its STOP are cut off, so that its APPENDS append to
    the StreamedList's list written before it."""

    def __init__(self, file, protocol):
        if not 2 <= protocol <= 3:
            raise ValueError('a streamed pickle needs protocol 2 or 3 (explicit memo numbers)')
        super().__init__(file, protocol)
        self.dispatch = dict(pickle._Pickler.dispatch)
        self.dispatch[StreamedList] = StreamingPickler.save_streamed

    def save_streamed(self, obj):
        self.write(pickle.EMPTY_LIST)
        self.memoize(obj)
        kept = dict(self.memo)   # the memo before the list, and what its parts keep
        pads = []
        for make in obj.parts:
            part = make()
            # CPython's pickler numbers a new object by the size of its memo:
            # placeholders fill the numbers a dropped object had, so that
            # nothing new takes a kept object's number.
            top = max(index for index, _ in kept.values()) + 1
            while len(pads) < top - len(kept):
                pads.append(object())
            memo = dict(kept)
            for pad in pads[:top - len(kept)]:
                memo[id(pad)] = (0, pad)   # never referred to: any number
            out = io.BytesIO()
            chunk = pickle.Pickler(out, self.proto)
            chunk.memo = memo
            chunk.dump(part)
            for key, (index, value) in chunk.memo.copy().items():
                if key in obj.keep and key not in kept:
                    kept[key] = (index, value)
            self.write(self._appends_of(out.getvalue()))

    @staticmethod
    def _appends_of(data):
        # PROTO n, EMPTY_LIST, then BINPUT i (q + 1 byte) or LONG_BINPUT (r + 4).
        assert data[0:1] == pickle.PROTO and data[2:3] == pickle.EMPTY_LIST, data[:8]
        start = 5 if data[3:4] == pickle.BINPUT else 8
        assert data[3:4] in (pickle.BINPUT, pickle.LONG_BINPUT) and data[-1:] == pickle.STOP
        return data[start:-1]


def reachable_ids(obj):
    """The ids of every container and string reachable from obj (what pickle
    memoizes)."""
    seen, todo = set(), [obj]
    while todo:
        x = todo.pop()
        if id(x) in seen or not isinstance(x, (dict, list, tuple, str, bytes)):
            continue
        seen.add(id(x))
        if isinstance(x, dict):
            todo.extend(x.keys())
            todo.extend(x.values())
        elif isinstance(x, (list, tuple)):
            todo.extend(x)
    return seen


def write_object(obj, path, protocol, compress, stream=False):
    """Pickles obj to path (through a temporary file). With `stream`, obj may
    hold StreamedLists: see StreamingPickler."""
    tmp = path + '.tmp'
    with open(tmp, 'wb') as f:
        out = gzip.GzipFile(filename='', mode='wb', fileobj=f, mtime=0) if compress else f
        if stream:
            StreamingPickler(out, protocol).dump(obj)
        else:
            pickle.dump(obj, out, protocol=protocol)
        if compress:
            out.close()
    os.replace(tmp, path)


# ---------------------------------------------------------------------------
# The corpus of variants.

CORPUS = [
    # (file name, options)
    ('basic-p0.pickle', dict(protocol=0, events=400, seed=10)),
    ('basic-p1.pickle', dict(protocol=1, events=400, seed=11)),
    ('basic-p2.pickle', dict(protocol=2, events=600, seed=12)),
    ('basic-p3.pickle', dict(protocol=3, events=600, seed=13)),
    ('basic-p4.pickle', dict(protocol=4, events=1500, seed=14)),
    ('basic-p5.pickle', dict(protocol=5, events=600, seed=15)),
    ('multi-device-3.pickle', dict(devices=3, events=1500, seed=20)),
    ('multi-device-4-p2.pickle', dict(devices=4, events=900, protocol=2, seed=21)),
    ('stacks-all.pickle', dict(stacks='all', events=800, seed=30)),
    ('stacks-all-p2.pickle', dict(stacks='all', events=400, protocol=2, seed=31)),
    ('steps-marks.pickle', dict(steps=5, marks=True, events=2000, seed=40)),
    ('steps-open-last.pickle', dict(steps=3, events=800, open_last_step=True, seed=41)),
    ('oom.pickle', dict(oom=True, events=700, seed=50)),
    ('oom-multi-device.pickle', dict(oom=True, devices=2, stacks='all', events=600, seed=51)),
    ('expandable.pickle', dict(expandable=True, events=1500, seed=60)),
    ('ring-buffer.pickle', dict(ring_buffer=700, events=3000, seed=70)),
    ('late-start.pickle', dict(late_start=True, events=1200, seed=80)),
    ('legacy.pickle', dict(legacy=True, events=600, seed=90)),
    ('legacy-p2.pickle', dict(legacy=True, events=300, protocol=2, seed=91)),
    ('big-addresses.pickle', dict(big_addresses=True, events=600, seed=100)),
    ('big-addresses-p0.pickle', dict(big_addresses=True, events=200, protocol=0, seed=101)),
    ('negative-addresses-p2.pickle', dict(negative_addresses=True, events=600,
                                          protocol=2, seed=102)),
    ('graph-pool.pickle', dict(graph_pool=True, events=1200, seed=110)),
    ('no-time.pickle', dict(no_time=True, events=600, seed=120)),
    ('gzip.pickle.gz', dict(gzip=True, events=800, seed=130)),
    ('top-level-list.pickle', dict(top_level_list=True, events=600, seed=140)),
    ('empty.pickle', dict(empty=True, seed=150)),
    ('empty-2-devices-p2.pickle', dict(empty=True, devices=2, protocol=2, seed=151)),
    ('odd-actions.pickle', dict(odd_actions=True, steps=4, events=900, seed=160)),
    ('extras-p0.pickle', dict(extras=True, events=60, protocol=0, seed=170)),
    ('extras-p2.pickle', dict(extras=True, events=60, protocol=2, seed=172)),
    ('extras-p3.pickle', dict(extras=True, events=60, protocol=3, seed=173)),
    ('extras-p4.pickle', dict(extras=True, events=60, protocol=4, seed=174)),
    ('extras-p5.pickle', dict(extras=True, events=60, protocol=5, seed=175)),
    ('combo-all-features.pickle', dict(devices=2, stacks='all', steps=4, marks=True,
                                       expandable=True, late_start=True, graph_pool=True,
                                       events=2500, seed=180)),
    ('combo-ring-late-big-p5.pickle', dict(ring_buffer=500, late_start=True,
                                           big_addresses=True, marks=True, steps=3,
                                           protocol=5, events=2000, seed=181)),
]


def write_corpus(directory):
    os.makedirs(directory, exist_ok=True)
    manifest = {}
    for name, kw in CORPUS:
        opts = Options(**kw)
        entry = write_snapshot(opts, os.path.join(directory, name))
        entry['options'] = kw
        manifest[name] = entry
    with open(os.path.join(directory, 'manifest.json'), 'w') as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
    return manifest


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--out')
    ap.add_argument('--corpus', metavar='DIR')
    ap.add_argument('--events', type=int, default=2000)
    ap.add_argument('--protocol', type=int, default=None, choices=range(0, 6),
                    help='pickle protocol (default 4; with --replicate, the fixture\'s)')
    ap.add_argument('--devices', type=int, default=1)
    ap.add_argument('--stacks', choices=['python', 'all'], default='python')
    ap.add_argument('--steps', type=int, default=0)
    ap.add_argument('--sites', type=int, default=0, metavar='N',
                    help='N forward call sites of a model with many modules instead of the '
                         'fixed ~40 (with --stacks all: N distinct stacks, a few hundred frames)')
    ap.add_argument('--marks', action='store_true')
    ap.add_argument('--bridge', action='store_true',
                    help="Megatron Bridge's shape: its record_function marks (FusedAdam's "
                         "Optimizer.step#, CustomFSDP.forward, nccl:all_reduce, the data loader) "
                         "and no ProfilerStep marks; --steps N still sizes N iterations")
    ap.add_argument('--oom', action='store_true')
    ap.add_argument('--oom-device', type=int, default=0, metavar='D',
                    help='the device whose trace ends in the oom (default 0)')
    ap.add_argument('--expandable', action='store_true')
    ap.add_argument('--ring-buffer', type=int, default=0, metavar='K')
    ap.add_argument('--late-start', action='store_true')
    ap.add_argument('--legacy', action='store_true')
    ap.add_argument('--big-addresses', action='store_true')
    ap.add_argument('--negative-addresses', action='store_true',
                    help='addresses >= 2**63 written as negative int64, as the C++ writer does')
    ap.add_argument('--graph-pool', action='store_true')
    ap.add_argument('--no-time', action='store_true')
    ap.add_argument('--seed', type=int, default=0)
    ap.add_argument('--batch-scale', type=float, default=1.0,
                    help='multiply activation and input sizes (the same model with a larger '
                         'batch); weights keep their size')
    ap.add_argument('--gzip', action='store_true')
    ap.add_argument('--top-level-list', action='store_true')
    ap.add_argument('--empty', action='store_true')
    ap.add_argument('--extras', action='store_true',
                    help='add a top-level key with edge-case values for the generic dump')
    ap.add_argument('--odd-actions', action='store_true',
                    help="add 'snapshot' and unknown 'user_defined' trace entries")
    ap.add_argument('--open-last-step', action='store_true',
                    help='leave the ProfilerStep cut by the end of the trace without END')
    ap.add_argument('--replicate', metavar='FIXTURE',
                    help='repeat the trace of a real (data-only) snapshot until it has --events '
                         'entries, each repetition in its own address range (see above)')
    ap.add_argument('--shared-frame-lists', action='store_true',
                    help='with --replicate: every repetition uses the fixture\'s frame list '
                         'objects, so that a later repetition\'s entry writes its list as a memo '
                         'reference (a smaller file than a real run\'s); by default each '
                         'repetition has its own lists (of the same frame dicts), as a long '
                         'real run has them')
    ap.add_argument('--stream', action='store_true',
                    help='with --replicate: write each repetition as it is made, never holding '
                         'the trace (any --events on a small machine); protocol 3 unless '
                         '--protocol 2 (see StreamingPickler)')
    ap.add_argument('--manifest', metavar='PATH', help='write expected values as JSON')
    args = ap.parse_args(argv)
    if args.corpus:
        write_corpus(args.corpus)
        return 0
    if not args.out:
        ap.error('one of --out or --corpus is required')
    if args.replicate:
        # The simulation's options mean nothing for a real history: refuse them.
        own = {'out', 'corpus', 'manifest', 'replicate', 'events', 'protocol', 'gzip',
               'shared_frame_lists', 'stream'}
        ignored = sorted('--' + k.replace('_', '-') for k, v in vars(args).items()
                         if k not in own and v != ap.get_default(k))
        if ignored:
            ap.error('--replicate takes only --events, --out, --gzip, --protocol, '
                     '--shared-frame-lists, --stream and --manifest, not ' + ', '.join(ignored))
        if args.stream and args.protocol not in (None, 2, 3):
            ap.error('--stream writes protocol 2 or 3 (explicit memo numbers), not %d'
                     % args.protocol)
        if args.events < 1:
            ap.error('--replicate needs --events >= 1')
        try:
            obj, protocol, manifest = replicate_snapshot(args.replicate, args.events,
                                                         args.shared_frame_lists, args.stream)
        except ReplicateError as e:
            print('make_snapshot.py: error: %s' % e, file=sys.stderr)
            return 1
        if args.protocol is not None:
            protocol = args.protocol
        elif args.stream:
            protocol = 3
        elif protocol is None or protocol < 2:
            protocol = 4
        write_object(obj, args.out, protocol, args.gzip, args.stream)
        if args.manifest:
            manifest['protocol'] = protocol
            with open(args.manifest, 'w') as f:
                json.dump(manifest, f, indent=1, sort_keys=True)
        return 0
    if args.protocol is None:
        args.protocol = 4
    if args.shared_frame_lists:
        ap.error('--shared-frame-lists goes with --replicate')
    if args.stream:
        ap.error('--stream goes with --replicate')
    if args.devices < 1:
        ap.error('--devices must be >= 1')
    if not 0 <= args.oom_device < args.devices:
        ap.error('--oom-device must name one of the --devices')
    kw = {k: v for k, v in vars(args).items()
          if k not in ('out', 'corpus', 'manifest', 'replicate', 'shared_frame_lists')}
    opts = Options(**kw)
    opts.marks = opts.marks or opts.bridge
    manifest = write_snapshot(opts, args.out)
    if args.manifest:
        with open(args.manifest, 'w') as f:
            json.dump(manifest, f, indent=1, sort_keys=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
