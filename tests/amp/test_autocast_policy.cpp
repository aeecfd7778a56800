// The autocast policy table: every public op has exactly one row, every op consults the table
// at entry, the policies give the dtypes they promise, and docs/autocast.md shows the table
// the code has.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "amp/autocast_dispatch.h"
#include "amp/policy.h"
#include "mantissa/amp/autocast.h"
#include "mantissa/core/generator.h"
#include "mantissa/nn/functional.h"
#include "mantissa/ops/attention.h"
#include "mantissa/ops/batch_norm.h"
#include "mantissa/ops/complex.h"
#include "mantissa/ops/conv.h"
#include "mantissa/ops/dropout.h"
#include "mantissa/ops/elementwise.h"
#include "mantissa/ops/embedding.h"
#include "mantissa/ops/layer_norm.h"
#include "mantissa/ops/loss.h"
#include "mantissa/ops/matmul.h"
#include "mantissa/ops/pool.h"
#include "mantissa/ops/reduce.h"
#include "mantissa/ops/rotary.h"
#include "mantissa/ops/scatter.h"
#include "mantissa/ops/shape_ops.h"
#include "mantissa/ops/silu.h"
#include "mantissa/ops/softmax.h"
#include "support/test_util.h"

namespace mantissa {
namespace {

using namespace mantissa::testing;

namespace fs = std::filesystem;
using amp::CastPolicy;
namespace F = nn::functional;

// The repository root, found from this file's compile-time path (absolute, or relative to the
// build directory that holds the test binary when ccache rewrites it).
std::optional<fs::path> source_root() {
  fs::path here = __FILE__;
  if (here.is_relative()) {
    std::error_code ec;
    const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    if (ec) return std::nullopt;
    here = exe.parent_path() / here;
  }
  const fs::path root = here.parent_path().parent_path().parent_path();
  if (!fs::exists(root / "include" / "mantissa" / "ops")) return std::nullopt;
  return root;
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// One call per public entry point (each overload), with the op name it must report.
struct OpCall {
  std::string name;
  std::function<void()> call;
};

std::vector<OpCall> all_op_calls() {
  const Tensor x = rnd({2, 3}, kFloat32, 1), y = rnd({2, 3}, kFloat32, 2);
  const Tensor pos = add(abs(x), 0.5), m = rnd({3, 2}, kFloat32, 3);
  const Tensor cond = gt(x, 0.0);
  const Tensor idx = tensor<int64_t>({1, 0});
  const Tensor gidx = tensor<int64_t>({0, 2, 1, 1, 0, 2}, {2, 3});
  const Tensor target = tensor<int64_t>({2, 0});
  const Tensor z = complex(x, y);
  const Tensor w = rnd({4, 3}, kFloat32, 4), b = rnd({4}, kFloat32, 5);
  return {
      {"add", [=] { add(x, y); }},
      {"add", [=] { add(x, 2.0); }},
      {"add", [=] { (void)(x + y); }},
      {"sub", [=] { sub(x, y); }},
      {"sub", [=] { sub(x, 2.0); }},
      {"sub", [=] { (void)(x - 1.0); }},
      {"mul", [=] { mul(x, y); }},
      {"mul", [=] { mul(x, 2.0); }},
      {"mul", [=] { (void)(2.0 * x); }},
      {"div", [=] { div(x, pos); }},
      {"div", [=] { div(x, 2.0); }},
      {"rsub", [=] { rsub(x, 1.0); }},
      {"rsub", [=] { (void)(1.0 - x); }},
      {"rdiv", [=] { rdiv(pos, 1.0); }},
      {"rdiv", [=] { (void)(1.0 / pos); }},
      {"pow", [=] { pow(pos, 2.5); }},
      {"pow", [=] { pow(pos, y); }},
      {"maximum", [=] { maximum(x, y); }},
      {"minimum", [=] { minimum(x, y); }},
      {"neg", [=] { neg(x); }},
      {"neg", [=] { (void)(-x); }},
      {"abs", [=] { abs(x); }},
      {"exp", [=] { exp(x); }},
      {"log", [=] { log(pos); }},
      {"sqrt", [=] { sqrt(pos); }},
      {"rsqrt", [=] { rsqrt(pos); }},
      {"tanh", [=] { tanh(x); }},
      {"sigmoid", [=] { sigmoid(x); }},
      {"relu", [=] { relu(x); }},
      {"relu", [=] { F::relu(x); }},
      {"gelu", [=] { gelu(x); }},
      {"gelu", [=] { F::gelu(x, "tanh"); }},
      {"silu", [=] { silu(x); }},
      {"silu_mul", [=] { silu_mul(x, y); }},
      {"rotate_half", [=] { rotate_half(m); }},
      {"apply_rotary_embedding", [=] { apply_rotary_embedding(m, m, m); }},
      {"clamp", [=] { clamp(x, -0.5, 0.5); }},
      {"eq", [=] { eq(x, y); }},
      {"eq", [=] { eq(x, 0.0); }},
      {"ne", [=] { ne(x, y); }},
      {"ne", [=] { ne(x, 0.0); }},
      {"lt", [=] { lt(x, y); }},
      {"lt", [=] { lt(x, 0.0); }},
      {"le", [=] { le(x, y); }},
      {"le", [=] { le(x, 0.0); }},
      {"gt", [=] { gt(x, y); }},
      {"gt", [=] { gt(x, 0.0); }},
      {"ge", [=] { ge(x, y); }},
      {"ge", [=] { ge(x, 0.0); }},
      {"isfinite", [=] { isfinite(x); }},
      {"where", [=] { where(cond, x, y); }},
      {"where", [=] { where(cond, x, 0.0); }},
      {"where", [=] { where(cond, 0.0, y); }},
      {"sum", [=] { sum(x); }},
      {"sum", [=] { sum(x, {1}); }},
      {"mean", [=] { mean(x); }},
      {"mean", [=] { mean(x, {0}, true); }},
      {"amax", [=] { amax(x, {1}); }},
      {"max", [=] { max(x); }},
      {"max", [=] { max(x, 1); }},
      {"argmax", [=] { argmax(x, 1); }},
      {"cat",
       [=] {
         cat({x, y});
       }},
      {"stack",
       [=] {
         stack({x, y});
       }},
      {"index_select", [=] { index_select(x, 1, idx); }},
      {"gather", [=] { gather(x, 1, gidx); }},
      {"scatter", [=] { scatter(x, 1, gidx, y); }},
      {"scatter_add", [=] { scatter_add(x, 1, gidx, y); }},
      {"index_add", [=] { index_add(x, 0, idx, y); }},
      {"index_put", [=] { index_put(x, {idx}, y); }},
      {"complex", [=] { complex(x, y); }},
      {"real", [=] { real(z); }},
      {"imag", [=] { imag(z); }},
      {"conj", [=] { conj(z); }},
      {"angle", [=] { angle(z); }},
      {"softmax", [=] { softmax(x, 1); }},
      {"log_softmax", [=] { log_softmax(x, 1); }},
      {"cross_entropy", [=] { cross_entropy(x, target); }},
      {"nll_loss", [=] { nll_loss(x, target); }},
      {"mse_loss", [=] { mse_loss(x, y); }},
      {"matmul", [=] { matmul(x, m); }},
      {"linear", [=] { F::linear(x, w, b); }},
      // the CNN layers
      {"conv2d",
       [] {
         conv2d(rnd({1, 2, 4, 4}, kFloat32, 6), rnd({3, 2, 3, 3}, kFloat32, 7));
       }},
      {"max_pool2d",
       [] {
         max_pool2d(rnd({1, 2, 4, 4}, kFloat32, 6), {2, 2});
       }},
      {"avg_pool2d",
       [] {
         avg_pool2d(rnd({1, 2, 4, 4}, kFloat32, 6), {2, 2});
       }},
      {"adaptive_avg_pool2d",
       [] {
         adaptive_avg_pool2d(rnd({1, 2, 4, 4}, kFloat32, 6), {1, 1});
       }},
      {"batch_norm",
       [] {
         batch_norm(rnd({2, 3}, kFloat32, 6), Tensor(), Tensor(), Tensor(), Tensor(), true);
       }},
      {"dropout", [=] { dropout(x, 0.5); }},
      {"dropout", [=] { F::dropout(x, 0.5); }},
      {"layer_norm", [=] { layer_norm(x, {3}, b.narrow(0, 0, 3), Tensor()); }},
      {"scaled_dot_product_attention", [=] { scaled_dot_product_attention(x, y, y); }},
      {"embedding", [=] { embedding(w, idx); }},
  };
}

// Records the op names that reach the table on this thread.
class TraceScope {
 public:
  TraceScope() { amp::detail::t_policy_trace = &names; }
  ~TraceScope() { amp::detail::t_policy_trace = nullptr; }
  std::vector<std::string> names;
};

TEST(AutocastPolicy, TableHasOneRowPerOp) {
  std::set<std::string> seen;
  for (const amp::PolicyRow& r : amp::policy_table()) {
    EXPECT_TRUE(seen.insert(std::string(r.op)).second) << "duplicate row " << r.op;
    EXPECT_FALSE(r.source.empty()) << r.op;
  }
  EXPECT_THROW(amp::policy_for("no_such_op"), Error);
}

TEST(AutocastPolicy, EveryOpConsultsTheTableAtEntry) {
  std::set<std::string> covered;
  for (const OpCall& c : all_op_calls()) {
    TraceScope trace;
    {
      amp::autocast ac;
      c.call();
    }
    // The op itself first; ops it calls internally run with autocast suspended.
    ASSERT_EQ(trace.names.size(), 1u) << c.name << " traced " << trace.names.size() << " names";
    EXPECT_EQ(trace.names[0], c.name);
    EXPECT_NO_THROW(amp::policy_for(c.name)) << c.name;
    covered.insert(c.name);
  }
  // Every row is exercised by a call above (a row for an op that does not exist, or an op
  // this test forgot, shows up here).
  for (const amp::PolicyRow& r : amp::policy_table())
    EXPECT_TRUE(covered.count(std::string(r.op))) << "no call for table row " << r.op;
  // Off: nothing reaches the table.
  TraceScope trace;
  for (const OpCall& c : all_op_calls()) c.call();
  EXPECT_TRUE(trace.names.empty());
}

TEST(AutocastPolicy, EveryDeclaredOpHasARow) {
  const auto root = source_root();
  if (!root) GTEST_SKIP() << "source tree not found next to the test binary";
  // Free functions returning a tensor in the public op headers are ops.
  std::vector<fs::path> headers;
  for (const auto& e : fs::directory_iterator(*root / "include" / "mantissa" / "ops"))
    if (e.path().extension() == ".h") headers.push_back(e.path());
  headers.push_back(*root / "include" / "mantissa" / "nn" / "functional.h");
  const std::regex decl(R"(^\s*(?:Tensor|ValuesIndices)\s+([a-z_][a-z0-9_]*)\s*\()");
  std::set<std::string> declared;
  for (const fs::path& h : headers) {
    std::istringstream lines(read_file(h));
    std::string line;
    std::smatch mt;
    while (std::getline(lines, line))
      if (std::regex_search(line, mt, decl)) declared.insert(mt[1]);
  }
  EXPECT_GE(declared.size(), 40u);
  std::set<std::string> rows;
  for (const amp::PolicyRow& r : amp::policy_table()) rows.insert(std::string(r.op));
  for (const std::string& op : declared)
    EXPECT_TRUE(rows.count(op)) << "op '" << op << "' has no autocast policy row";
  for (const std::string& op : rows)
    EXPECT_TRUE(declared.count(op)) << "row '" << op << "' names no declared op";
}

TEST(AutocastPolicy, DocsShowTheTableOfTheCode) {
  const auto root = source_root();
  if (!root) GTEST_SKIP() << "source tree not found next to the test binary";
  const std::string doc = read_file(*root / "docs" / "autocast.md");
  const std::string table = amp::policy_table_markdown();
  EXPECT_NE(doc.find(table), std::string::npos)
      << "docs/autocast.md is out of date; its policy table must read:\n"
      << table;
}

// Each policy, checked on every op that has it, with bf16 and fp32 inputs.
TEST(AutocastPolicy, PoliciesGiveTheirDtypes) {
  const std::map<std::string, CastPolicy> want = {
      {"matmul", CastPolicy::kLowerPrecision},
      {"linear", CastPolicy::kLowerPrecision},
      {"conv2d", CastPolicy::kLowerPrecision},
      {"max_pool2d", CastPolicy::kUnlisted},
      {"batch_norm", CastPolicy::kUnlisted},
      {"softmax", CastPolicy::kFp32},
      {"log_softmax", CastPolicy::kFp32},
      {"cross_entropy", CastPolicy::kFp32},
      {"nll_loss", CastPolicy::kFp32},
      {"mse_loss", CastPolicy::kFp32},
      {"exp", CastPolicy::kFp32},
      {"log", CastPolicy::kFp32},
      {"pow", CastPolicy::kFp32},
      {"sum", CastPolicy::kFp32},
      {"rsqrt", CastPolicy::kFp32},
      {"rdiv", CastPolicy::kFp32},
      {"cat", CastPolicy::kPromote},
      {"stack", CastPolicy::kPromote},
      {"where", CastPolicy::kPromote},
      {"mean", CastPolicy::kUnlisted},
      {"add", CastPolicy::kUnlisted},
      {"relu", CastPolicy::kUnlisted},
      {"index_select", CastPolicy::kUnlisted},
      {"scatter", CastPolicy::kFp32},
      {"scatter_add", CastPolicy::kFp32},
      {"index_add", CastPolicy::kFp32},
      {"index_put", CastPolicy::kFp32},
  };
  for (const auto& [op, p] : want) EXPECT_EQ(amp::policy_for(op), p) << op;

  const Tensor f = add(abs(rnd({2, 3}, kFloat32, 1)), 0.5);
  const Tensor h = f.to(kBFloat16);
  const Tensor t = tensor<int64_t>({2, 0});
  const Tensor cond = gt(rnd({2, 3}, kFloat32, 2), 0.0);
  amp::autocast ac;
  // lower precision: fp32 in, bf16 out
  EXPECT_EQ(matmul(f, f.t()).dtype(), kBFloat16);
  EXPECT_EQ(F::linear(f, f, Tensor()).dtype(), kBFloat16);
  EXPECT_EQ(conv2d(f.reshape({1, 1, 2, 3}), f.reshape({1, 1, 2, 3})).dtype(), kBFloat16);
  // fp32: bf16 in, fp32 out
  for (const auto& fn : std::vector<std::function<Tensor(const Tensor&)>>{
           [](const Tensor& a) { return softmax(a, 1); },
           [](const Tensor& a) { return log_softmax(a, 1); },
           [&](const Tensor& a) { return cross_entropy(a, t); },
           [&](const Tensor& a) { return nll_loss(a, t); },
           [](const Tensor& a) { return mse_loss(a, a); }, [](const Tensor& a) { return exp(a); },
           [](const Tensor& a) { return log(a); }, [](const Tensor& a) { return pow(a, 3.0); },
           [](const Tensor& a) { return pow(a, a); }, [](const Tensor& a) { return sum(a); },
           [](const Tensor& a) { return sum(a, {0}); }, [](const Tensor& a) { return rsqrt(a); },
           [](const Tensor& a) { return rdiv(a, 2.0); }}) {
    EXPECT_EQ(fn(h).dtype(), kFloat32);
  }
  // promote
  EXPECT_EQ(cat({h, f}).dtype(), kFloat32);
  EXPECT_EQ(stack({f, h}).dtype(), kFloat32);
  EXPECT_EQ(where(cond, h, f).dtype(), kFloat32);
  EXPECT_EQ(where(cond, h, 1.0).dtype(), kBFloat16);
  // unlisted
  EXPECT_EQ(mean(h).dtype(), kBFloat16);
  EXPECT_EQ(sqrt(h).dtype(), kBFloat16);
  EXPECT_EQ(index_select(h, 1, tensor<int64_t>({0})).dtype(), kBFloat16);
}

TEST(AutocastPolicy, MarkdownListsEveryRowOnce) {
  const std::string md = amp::policy_table_markdown();
  for (const amp::PolicyRow& r : amp::policy_table()) {
    const std::string cell =
        "| `" + std::string(r.op) + "` | " + std::string(amp::policy_name(r.policy)) + " |";
    EXPECT_NE(md.find(cell), std::string::npos) << cell;
  }
  EXPECT_EQ(std::count(md.begin(), md.end(), '\n'), 2 + std::ssize(amp::policy_table()));
}

}  // namespace
}  // namespace mantissa
