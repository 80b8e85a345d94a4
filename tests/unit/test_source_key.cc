// Source attribution: memsnap's rule (v2, the user's code) and the reference
// scripts' rule (--keys reference), frame class by frame class.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <random>
#include <string>

#include "analysis/core/source_key.h"
#include "memsnap/error.h"
#include "model_builder.h"

namespace memsnap {
namespace {

SourceKeyOptions depth(int frames) {
  SourceKeyOptions options;
  options.depth = frames;
  return options;
}

SourceKeyOptions reference(int frames = 1) {
  SourceKeyOptions options = depth(frames);
  options.rule = KeyRule::kReference;
  return options;
}

TEST(SourceKey, SkipsInternalFramesAndKeepsDepth) {
  testing::ModelBuilder b;
  StackId stack =
      b.stack({{"_call_impl", "/usr/lib/python3.11/site-packages/torch/nn/modules/module.py", 1501},
               {"forward", "/home/me/model.py", 42},
               {"train", "/home/me/train.py", 7},
               {"<module>", "/home/me/train.py", 99}});
  SourceKeys depth1(b.model, depth(1));
  EXPECT_EQ(depth1.key(stack), "forward@model.py:42");
  SourceKeys depth2(b.model, depth(2));
  EXPECT_EQ(depth2.key(stack), "forward@model.py:42 -> train@train.py:7");
  SourceKeys depth3(b.model, depth(3));
  // <module> is the user's code in v2 (a script's top level), internal in the reference's rule.
  EXPECT_EQ(depth3.key(stack), "forward@model.py:42 -> train@train.py:7 -> <module>@train.py:99");
  SourceKeys reference3(b.model, reference(3));
  EXPECT_EQ(reference3.key(stack), "forward@model.py:42 -> train@train.py:7");
}

TEST(SourceKey, ScriptsAndNotebooksAreTheUsersCode) {
  testing::ModelBuilder b;
  StackId script = b.stack(
      {{"_conv_forward", "/opt/conda/lib/python3.10/site-packages/torch/nn/modules/conv.py", 549},
       {"forward", "/opt/conda/lib/python3.10/site-packages/torch/nn/modules/conv.py", 553},
       {"_call_impl", "/opt/conda/lib/python3.10/site-packages/torch/nn/modules/module.py", 1501},
       {"<module>", "/home/me/inference2.py", 198}});
  StackId notebook =
      b.stack({{"relu", "/usr/lib/python3/dist-packages/torch/nn/functional.py", 1457},
               {"<module>", "/tmp/ipykernel_4242/1234567.py", 3}});
  StackId ipython = b.stack({{"interpolate", "torch/nn/functional.py", 4536},
                             {"<module>", "<ipython-input-7-0a1b2c3d>", 2}});
  SourceKeys keys(b.model, depth(1));
  EXPECT_EQ(keys.key(script), "<module>@inference2.py:198");
  // A notebook's cells run from temporary files: named as the cells they are.
  EXPECT_EQ(keys.key(notebook), "<module>@notebook cell 1234567:3");
  EXPECT_EQ(keys.key(ipython), "<module>@notebook cell In[7]:2");
  // A file of digits outside ipykernel's folder is a file like any other.
  StackId digits = b.stack({{"<module>", "/home/me/2024.py", 5}});
  EXPECT_EQ(keys.key(digits), "<module>@2024.py:5");
  SourceKeys reference_keys(b.model, reference());
  EXPECT_EQ(reference_keys.key(script), "_conv_forward@conv.py:549");
}

TEST(SourceKey, WindowsPathsAreLibraryCodeToo) {
  testing::ModelBuilder b;
  StackId stack = b.stack(
      {{"_call_impl", "C:\\Python311\\Lib\\site-packages\\torch\\nn\\modules\\module.py", 1501},
       {"__enter__", "C:\\Python311\\Lib\\contextlib.py", 137},
       {"forward", "C:\\Users\\me\\project\\model.py", 42}});
  SourceKeys keys(b.model, depth(1));
  EXPECT_EQ(keys.key(stack), "forward@model.py:42");
}

TEST(SourceKey, LibraryFilesByFamily) {
  EXPECT_TRUE(is_library_file("/x/site-packages/torch/_dynamo/eval_frame.py"));
  EXPECT_TRUE(is_library_file("/x/site-packages/torch/_inductor/graph.py"));
  EXPECT_TRUE(is_library_file("/x/site-packages/torch/fx/graph_module.py"));
  EXPECT_TRUE(is_library_file("/x/site-packages/triton/runtime/jit.py"));
  EXPECT_TRUE(is_library_file("/tmp/torchinductor_me/cl/ccl4iff3u.py"));
  EXPECT_TRUE(is_library_file("<eval_with_key>.12"));
  EXPECT_TRUE(is_library_file("<frozen runpy>"));
  EXPECT_TRUE(is_library_file("/usr/lib/python3.11/threading.py"));
  EXPECT_TRUE(is_library_file("/x/hydra/_internal/utils.py"));
  EXPECT_FALSE(is_library_file("/usr/lib/python3.11/site-packages/transformers/modeling_llama.py"));
  EXPECT_FALSE(is_library_file("/usr/lib/python3/dist-packages/accelerate/big_modeling.py"));
  EXPECT_FALSE(is_library_file("/home/me/train.py"));
  EXPECT_FALSE(is_library_file("<ipython-input-3-abc>"));
}

// The standard library is the interpreter's own lib folder, however the
// interpreter was installed and however the path is spelled.
TEST(SourceKey, StandardLibraryByWhatItIsUnderAnyInstaller) {
  for (const char* path : {
           // POSIX: the distribution (Debian, Fedora's lib64), pyenv, conda, uv, free-threaded.
           "/usr/lib/python3.11/threading.py",
           "/usr/lib64/python3.12/copy.py",
           "/home/me/.pyenv/versions/3.10.4/lib/python3.10/copy.py",
           "/opt/conda/lib/python3.10/json/decoder.py",
           "/home/me/.local/share/uv/python/cpython-3.12.8-linux-x86_64-gnu/lib/python3.12/copy.py",
           "/usr/local/lib/python3.13t/contextlib.py",
           // Windows: uv (lower-case lib), the python.org installer in either case,
           // conda, pyenv-win; packages of the standard library too.
           "C:\\Users\\me\\uv\\python\\cpython-3.10.19-windows-x86_64-none\\lib\\copy.py",
           "C:\\Python311\\Lib\\contextlib.py",
           "C:\\Users\\me\\AppData\\Local\\Programs\\Python\\Python310\\lib\\threading.py",
           "C:\\PYTHON311\\LIB\\COPY.PY",
           "C:\\Users\\me\\miniconda3\\envs\\x\\Lib\\concurrent\\futures\\thread.py",
           "C:\\Users\\me\\.pyenv\\pyenv-win\\versions\\3.10.11\\Lib\\cProfile.py",
       }) {
    EXPECT_TRUE(is_standard_library_file(path)) << path;
    EXPECT_TRUE(is_library_file(path)) << path;
  }
  for (const char* path : {
           // Third-party code under the same lib folders is no standard library.
           "C:\\research\\DeComFL\\.venv\\lib\\site-packages\\transformers\\utils\\generic.py",
           "/usr/lib/python3/dist-packages/accelerate/big_modeling.py",
           "/opt/conda/lib/python3.10/site-packages/copy/__init__.py",
           // The user's own lib folders, and modules that only share a name.
           "/home/me/project/lib/model.py",
           "C:\\research\\DeComFL\\cezo_fl\\client.py",
           "/home/me/copy.py",
           "/home/me/project/lib/copying.py",
           "/home/me/project/lib",
       }) {
    EXPECT_FALSE(is_standard_library_file(path)) << path;
  }
}

// ZidongLiu_DeComFL: deepcopy under a uv-managed CPython hid the client's line.
TEST(SourceKey, WindowsUvStandardLibraryIsNotTheUsersCode) {
  testing::ModelBuilder b;
  StackId stack = b.stack(
      {{"__deepcopy__", "C:\\research\\DeComFL\\.venv\\lib\\site-packages\\torch\\_tensor.py", 150},
       {"deepcopy",
        "C:\\Users\\Zidong\\AppData\\Roaming\\uv\\python\\cpython-3.10.19-windows-x86_64-"
        "none\\lib\\copy.py",
        153},
       {"<dictcomp>", "C:\\research\\DeComFL\\cezo_fl\\client.py", 185}});
  SourceKeys keys(b.model, depth(1));
  EXPECT_EQ(keys.key(stack), "<dictcomp>@client.py:185");
}

// Thin helpers hand the tensor on to a torch op: the line that called them
// names the allocation. Other third-party packages stay the user's code.
TEST(SourceKey, HelperPackagesAreNeverTheAnswer) {
  testing::ModelBuilder b;
  StackId einops =
      b.stack({{"einsum", "/x/.venv/lib/python3.11/site-packages/einops/_backends.py", 291},
               {"einsum", "/x/.venv/lib/python3.11/site-packages/einops/einops.py", 907},
               {"forward", "/home/me/cs336_basics/model.py", 524}});
  StackId windows_einops =
      b.stack({{"reshape", "D:\\Dev\\a2\\.venv\\Lib\\site-packages\\einops\\_backends.py", 96},
               {"forward", "D:\\Dev\\a2\\cs336_basics\\model.py", 524}});
  StackId contraction =
      b.stack({{"_tensordot", "/x/site-packages/opt_einsum/backends/torch.py", 50},
               {"contract", "/x/site-packages/opt_einsum/contract.py", 763},
               {"attention", "/home/me/model.py", 77}});
  StackId transformers =
      b.stack({{"forward", "/x/site-packages/transformers/models/opt/modeling_opt.py", 212},
               {"einsum", "/x/site-packages/einops/einops.py", 907}});
  SourceKeys keys(b.model, depth(1));
  EXPECT_EQ(keys.key(einops), "forward@model.py:524");
  EXPECT_EQ(keys.key(windows_einops), "forward@model.py:524");
  EXPECT_EQ(keys.key(contraction), "attention@model.py:77");
  EXPECT_EQ(keys.key(transformers), "forward@modeling_opt.py:212");
  // A stack of helpers alone still gets a name: the first library frame.
  StackId only_helpers = b.stack({{"einsum", "/x/site-packages/einops/_backends.py", 291}});
  EXPECT_EQ(keys.key(only_helpers), "einsum@_backends.py:291");
  // --keep brings a helper back for someone who wants to see it.
  SourceKeyOptions keep = depth(1);
  keep.keep = {"einops/"};
  SourceKeys keeping(b.model, keep);
  EXPECT_EQ(keeping.key(einops), "einsum@_backends.py:291");
  // Every entry of the table names its package's files, under any installer
  // and separator, and says why; a package that only shares a prefix is not it.
  for (const HelperPackage& helper : helper_packages()) {
    EXPECT_FALSE(helper.evidence.empty());
    std::string file(helper.path_part);
    if (file.ends_with('/')) file += "f.py";
    EXPECT_TRUE(is_helper_package_file("/x/site-packages/" + file)) << file;
    std::string windows = "C:\\x\\Lib\\site-packages\\" + file;
    std::replace(windows.begin(), windows.end(), '/', '\\');
    EXPECT_TRUE(is_library_file(windows)) << windows;
    EXPECT_FALSE(is_helper_package_file("/x/site-packages/my" + file)) << file;
  }
}

TEST(SourceKey, RootNamesTheInnermostFrameUnderTheFolder) {
  testing::ModelBuilder b;
  StackId stack =
      b.stack({{"forward", "/x/site-packages/transformers/models/llama/modeling_llama.py", 300},
               {"step", "/home/me/proj/.venv/lib/python3.11/site-packages/lightning/loop.py", 40},
               {"train_step", "/home/me/proj/src/train.py", 88},
               {"main", "/home/me/proj/run.py", 5}});
  StackId elsewhere = b.stack({{"forward", "/x/site-packages/transformers/modeling_opt.py", 7},
                               {"relu", "/x/site-packages/torch/nn/functional.py", 1}});
  StackId backward = b.stack(
      {{"torch::autograd::generated::MmBackward0::apply(std::vector<at::Tensor>&&)", "??", 0}});
  SourceKeys plain(b.model, depth(1));
  EXPECT_EQ(plain.key(stack), "forward@modeling_llama.py:300");
  for (const char* root : {"/home/me/proj", "/home/me/proj/", "proj", "me/proj", "./proj"}) {
    SourceKeyOptions options = depth(2);
    options.roots = {root};
    SourceKeys keys(b.model, options);
    // The venv inside the repository is not the user's code.
    EXPECT_EQ(keys.key(stack), "train_step@train.py:88 -> main@run.py:5") << root;
    // Under no root: the user's code elsewhere, then the usual fallbacks.
    EXPECT_EQ(keys.key(elsewhere), "forward@modeling_opt.py:7") << root;
    EXPECT_EQ(keys.key(backward), "MmBackward0 (backward)") << root;
  }
  for (const char* root : {"/home/me/pro", "/me/proj", "src/train.py", "/", ""}) {
    SourceKeyOptions options = depth(1);
    options.roots = {root};
    SourceKeys keys(b.model, options);
    EXPECT_EQ(keys.key(stack),
              root == std::string("/") ? "train_step@train.py:88" : "forward@modeling_llama.py:300")
        << root;
  }
  // Windows paths match in any case and with either separator.
  testing::ModelBuilder w;
  StackId windows = w.stack(
      {{"forward", "C:\\research\\DeComFL\\.venv\\lib\\site-packages\\transformers\\opt.py", 9},
       {"<dictcomp>", "C:\\research\\DeComFL\\cezo_fl\\client.py", 185}});
  for (const char* root : {"c:/research/decomfl", "C:\\research\\DeComFL\\", "DeComFL/cezo_fl"}) {
    SourceKeyOptions options = depth(1);
    options.roots = {root};
    SourceKeys keys(w.model, options);
    EXPECT_EQ(keys.key(windows), "<dictcomp>@client.py:185") << root;
  }
}

TEST(SourceKey, CompiledCodeFallsBackToTheUsersFrameNotTheGeneratedFile) {
  testing::ModelBuilder b;
  StackId stack = b.stack({{"call", "/tmp/torchinductor_me/4i/c4iffabc.py", 3929},
                           {"__call__", "/x/site-packages/torch/_inductor/codecache.py", 1000},
                           {"_fn", "/x/site-packages/torch/_dynamo/eval_frame.py", 600},
                           {"train_step", "/home/me/train.py", 88}});
  SourceKeys keys(b.model, depth(1));
  EXPECT_EQ(keys.key(stack), "train_step@train.py:88");
}

TEST(SourceKey, FallsBackToFirstFramesWhenAllAreInternal) {
  testing::ModelBuilder b;
  StackId stack =
      b.stack({{"empty", "/x/torch/functional.py", 10}, {"inner", "/x/torch/amp/a.py", 3}});
  SourceKeys keys(b.model, depth(1));
  EXPECT_EQ(keys.key(stack), "empty@functional.py:10");
  SourceKeys reference_keys(b.model, reference());
  EXPECT_EQ(reference_keys.key(stack), "empty@functional.py:10");
}

TEST(SourceKey, CppFramesNeverWinOverPython) {
  testing::ModelBuilder b;
  StackId stack =
      b.stack({{"torch::unwind::unwind()", "??", 0},
               {"torch::CapturedTraceback::gather(bool, bool, bool)", "??", 0},
               {"c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc", "", 0},
               {"at::native::empty_cuda", "/pytorch/aten/src/ATen/native/cuda/EmptyTensor.cpp", 0},
               {"_PyEval_EvalFrameDefault", "??", 0},
               {"forward", "/home/me/model.py", 42}});
  SourceKeys keys(b.model, depth(1));
  EXPECT_EQ(keys.key(stack), "forward@model.py:42");
  // The reference's rule names the unwinder on stacks="all" files.
  SourceKeys reference_keys(b.model, reference());
  EXPECT_EQ(reference_keys.key(stack), "torch::unwind::unwind()@??:0");
}

TEST(SourceKey, CppOnlyStackSkipsCaptureMachinery) {
  testing::ModelBuilder b;
  StackId stack = b.stack({{"torch::unwind::unwind()", "??", 0},
                           {"c10::cuda::CUDACachingAllocator::malloc", "??", 0},
                           {"at::native::empty_cuda", "EmptyTensor.cpp", 0},
                           {"at::native::cat_out_cuda", "Shape.cu", 0}});
  SourceKeys keys(b.model, depth(1));
  EXPECT_EQ(keys.key(stack), "at::native::cat_out_cuda@Shape.cu:0");
  StackId machinery_only = b.stack({{"torch::unwind::unwind()", "??", 0}});
  EXPECT_EQ(keys.key(machinery_only), "<no frames>");
  StackId templated =
      b.stack({{"void at::native::gpu_reduce_kernel<float, float, 4>(at::TensorIterator&, "
                "at::native::ReduceOp<float> const&)",
                "Reduce.cuh", 0}});
  EXPECT_EQ(keys.key(templated), "at::native::gpu_reduce_kernel@Reduce.cuh:0");
}

TEST(SourceKey, TrimsCppSignatures) {
  EXPECT_EQ(trim_cpp_signature("at::native::empty_cuda(c10::ArrayRef<long>)"),
            "at::native::empty_cuda");
  EXPECT_EQ(trim_cpp_signature("at::(anonymous namespace)::wrapper_CUDA_div_Tensor(at::Tensor "
                               "const&)"),
            "at::(anonymous namespace)::wrapper_CUDA_div_Tensor");
  EXPECT_EQ(trim_cpp_signature("std::vector<at::Tensor> foo::bar<int>(int) const"), "foo::bar");
  EXPECT_EQ(trim_cpp_signature("plain_function"), "plain_function");
}

TEST(SourceKey, AutogradNodeNamesAcrossBuilds) {
  EXPECT_EQ(autograd_node_name("torch::autograd::generated::BmmBackward0::apply(std::vector<at::"
                               "Tensor>&&)"),
            "BmmBackward0");
  EXPECT_EQ(autograd_node_name("torch::autograd::generated::BmmBackward0_apply_functional(std::"
                               "vector<at::Tensor>&&, std::array<bool, 2ul>)"),
            "BmmBackward0");
  EXPECT_EQ(autograd_node_name("torch::autograd::AccumulateGrad::apply(std::vector<at::Tensor>&&)"),
            "AccumulateGrad");
  EXPECT_EQ(autograd_node_name("torch::autograd::CopyBackwards::apply(std::vector<at::Tensor>&&)"),
            "CopyBackwards");
  EXPECT_EQ(autograd_node_name("torch::autograd::generated::details::div_tensor_other_backward("
                               "at::Tensor const&)"),
            "");
  EXPECT_EQ(autograd_node_name("at::native::cat_out_cuda"), "");
}

// The node name as the rule says it, character by character from every
// occurrence (quadratic: the reference for short names only).
std::string naive_node_name(std::string_view name) {
  if (name.find("AccumulateGrad") != std::string_view::npos) return "AccumulateGrad";
  const auto in_word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; };
  for (size_t at = name.find("Backward"); at != std::string_view::npos;
       at = name.find("Backward", at + 1)) {
    size_t begin = at;
    while (begin > 0 && in_word(name[begin - 1])) --begin;
    size_t end = at + 8;
    if (end < name.size() && name[end] == 's') ++end;
    while (end < name.size() && std::isdigit(static_cast<unsigned char>(name[end])) != 0) ++end;
    const bool ends = end == name.size() || !in_word(name[end]);
    if (begin < at && std::isupper(static_cast<unsigned char>(name[begin])) != 0 && ends) {
      return std::string(name.substr(begin, end - begin));
    }
  }
  return "";
}

// Issue 40, finding 6: each occurrence scanned back over the whole word
// ("xBackward" repeated over 1 MiB took minutes). The same answers as the
// reference on names made of the pieces that matter.
TEST(SourceKey, AutogradNodeNameEqualsTheRuleOnRandomNames) {
  const std::vector<std::string> pieces = {
      "Backward", "x", "Mul", "_", "::", "0", "s", "B", "(", " "};
  std::mt19937 random(40);
  for (int round = 0; round < 20000; ++round) {
    std::string name;
    const int count = static_cast<int>(random() % 12);
    for (int k = 0; k < count; ++k) name += pieces[random() % pieces.size()];
    ASSERT_EQ(autograd_node_name(name), naive_node_name(name)) << name;
  }
  std::string repeated;
  for (int k = 0; k < 1 << 17; ++k) repeated += "xBackward";
  EXPECT_EQ(autograd_node_name(repeated), "");
  EXPECT_EQ(autograd_node_name(repeated + "::MulBackward0::apply"), "MulBackward0");
}

TEST(SourceKey, FxProvenanceNamesTheModelLine) {
  EXPECT_EQ(
      fx_origin("  File \"/home/me/train.py\", line 88, in train_step\n"
                "    loss = model(x)\n"
                "  File \"/x/site-packages/torch/nn/modules/module.py\", line 1501, in _call_impl\n"
                "  File \"/home/me/model.py\", line 42, in forward\n"
                "    h = self.proj(x)\n"),
      "forward@model.py:42");
  EXPECT_EQ(fx_origin("  File \"C:\\\\me\\\\model.py\", line 7, in forward\n"),
            "forward@model.py:7");
  EXPECT_EQ(fx_origin("  File \"/x/torch/nn/functional.py\", line 1, in relu\n"), "");
  EXPECT_EQ(fx_origin("not a traceback"), "");
}

TEST(SourceKey, FxProvenanceScannerReadsWhatTheTracebackRegexRead) {
  // A broken entry ('File "' with no line number, a newline in the file
  // name) is passed over and the search goes on; the function name runs to
  // the next whitespace.
  EXPECT_EQ(fx_origin("File \"/a/m.py\", line x, in f\nFile \"/a/n.py\", line 3, in g(h) tail"),
            "g(h)@n.py:3");
  EXPECT_EQ(fx_origin("File \"/a/\nm.py\", line 3, in f"), "");
  EXPECT_EQ(fx_origin("File \"\", line 3, in f"), "");
  EXPECT_EQ(fx_origin("File \"/a/m.py\", line 3, in "), "");
  EXPECT_EQ(fx_origin("File \"/a/m.py\", line 3, in f"), "f@m.py:3");
  EXPECT_EQ(fx_origin("File \"File \"/a/m.py\", line 3, in f"), "f@m.py:3");
}

TEST(SourceKey, FxProvenanceOfAnyLengthInOnePass) {
  // std::regex recursed per character: a 30 KB trace overflowed the stack.
  std::string trace;
  for (int i = 0; i < 20000; ++i) trace += "  File \"/home/me/model.py\", line 42, in forward\n";
  trace += "File \"" + std::string(size_t{4} << 20, 'x');  // 4 MiB of an unfinished entry
  EXPECT_EQ(fx_origin(trace), "forward@model.py:42");
}

TEST(SourceKey, SkipAndKeepPatterns) {
  testing::ModelBuilder b;
  StackId stack = b.stack({{"checkpoint", "/home/me/utils/wrappers.py", 12},
                           {"forward", "/x/site-packages/torch/nn/modules/linear.py", 116},
                           {"forward", "/home/me/model.py", 42}});
  SourceKeyOptions skip = depth(1);
  skip.skip = {"wrappers\\.py"};
  SourceKeys skipping(b.model, skip);
  EXPECT_EQ(skipping.key(stack), "forward@model.py:42");
  SourceKeyOptions keep = skip;
  keep.keep = {"torch/nn/modules/linear\\.py"};
  SourceKeys keeping(b.model, keep);
  EXPECT_EQ(keeping.key(stack), "forward@linear.py:116");
  SourceKeyOptions broken = depth(1);
  broken.skip = {"(unclosed"};
  EXPECT_THROW(SourceKeys(b.model, broken), Error);
}

TEST(SourceKey, BackwardThreadStackNamesTheAutogradNode) {
  testing::ModelBuilder b;
  StackId stack = b.stack(
      {{"torch::unwind::unwind()", "??", 0},
       {"at::detail::empty_cuda(c10::ArrayRef<long>)", "??", 0},
       {"at::(anonymous namespace)::wrapper_CUDA_div_Tensor(at::Tensor const&)", "RegisterCUDA.cpp",
        0},
       {"torch::autograd::generated::MeanBackward0::apply(std::vector<at::Tensor>&&)", "??", 0},
       {"torch::autograd::Engine::thread_main(std::shared_ptr<torch::autograd::GraphTask> const&)",
        "??", 0}});
  SourceKeys keys(b.model, depth(2));
  EXPECT_EQ(keys.key(stack), "MeanBackward0 (backward)");
}

// glibc's thread start is written in assembly with a line number
// (`__clone3@clone3.S:81`): a C frame, never the user's code, and never the
// answer while the backward node is known.
TEST(SourceKey, CAndAssemblyFramesOfTheRuntimeAreNeverTheAnswer) {
  testing::ModelBuilder b;
  StackId backward = b.stack(
      {{"torch::unwind::unwind()", "??", 0},
       {"torch::autograd::generated::MeanBackward0::apply(std::vector<at::Tensor>&&)", "??", 0},
       {"execute_native_thread_routine", "/build/gcc/libstdc++-v3/src/c++11/thread.cc", 82},
       {"start_thread", "./nptl/pthread_create.c", 442},
       {"__clone3", "../sysdeps/unix/sysv/linux/x86_64/clone3.S", 81}});
  SourceKeys keys(b.model, depth(1));
  EXPECT_EQ(keys.key(backward), "MeanBackward0 (backward)");
  StackId threads_only = b.stack({{"start_thread", "./nptl/pthread_create.c", 442},
                                  {"__clone3", "../sysdeps/unix/sysv/linux/x86_64/clone3.S", 81},
                                  {"cudaLaunchKernel", "/usr/lib/libcudart.so.12", 5}});
  EXPECT_EQ(keys.key(threads_only), "cudaLaunchKernel@libcudart.so.12:5");
  EXPECT_TRUE(is_cpp_frame("clone3.S", 81));
  EXPECT_TRUE(is_cpp_frame("/usr/lib/x86_64-linux-gnu/libc.so.6", 3));
  EXPECT_FALSE(is_cpp_frame("/opt/conda/bin/torchrun", 8));  // a console script is Python
  EXPECT_FALSE(is_cpp_frame("/home/me/not.so.py", 3));
}

TEST(SourceKey, NoFrames) {
  testing::ModelBuilder b;
  SourceKeys keys(b.model, depth(1));
  EXPECT_EQ(keys.key(StackId{}), "<no frames>");
}

// key() hands out references; they must survive later calls that add to
// the cache (a hash map would rehash under them: found under ASan).
TEST(SourceKey, KeysStayValidWhileTheCacheGrows) {
  testing::ModelBuilder b;
  std::vector<StackId> stacks;
  stacks.reserve(2000);
  for (int i = 0; i < 2000; ++i) {
    stacks.push_back(b.stack({{"f" + std::to_string(i), "/home/me/model.py", i + 1}}));
  }
  SourceKeys keys(b.model, depth(1));
  std::vector<const std::string*> held;
  held.reserve(stacks.size());
  for (StackId stack : stacks) held.push_back(&keys.key(stack));
  for (size_t i = 0; i < stacks.size(); ++i) {
    EXPECT_EQ(*held[i], "f" + std::to_string(i) + "@model.py:" + std::to_string(i + 1));
  }
  // Stacks interned after the keys were made are keyed too.
  StackId later = b.stack({{"late", "/home/me/late.py", 5}});
  EXPECT_EQ(keys.key(later), "late@late.py:5");
  EXPECT_EQ(*held[0], "f0@model.py:1");
}

}  // namespace
}  // namespace memsnap
