// Issue #19, library side: no crash, no hang, no file destroyed, no silent
// garbage. Every test works on its own copy of a container made by the
// generator (tiny preset, with tokenizer), damages one thing, and checks
// the clear error and that nothing else was lost.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "container/container.h"
#include "format/format.h"
#include "generator.h"
#include "model/session_state.h"
#include "platform/platform.h"
#include "temp_dir.h"
#include "waste/engine.h"
#include "waste/files.h"
#include "waste/memplan.h"

namespace waste {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;
using Json = nlohmann::ordered_json;

bool Has(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void Spit(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

// One generated container per test process; each test copies it. A static
// object (not a leaked pointer) so that the directory is removed at exit:
// ctest runs every test as its own process, and each left ~1 MB in /tmp.
const std::string& Pristine() {
  static TempDir dir;
  static const std::string path = [] {
    gen::GenOptions o;
    o.out_dir = dir.path() + "/c";
    o.preset = "tiny";
    o.tokenizer = true;
    o.trace = "none";
    auto r = gen::Generate(o);
    EXPECT_TRUE(r.has_value()) << (r ? "" : r.error().message());
    return o.out_dir;
  }();
  return path;
}

class Copy : public TempDir {
 public:
  Copy() {
    dir_ = path() + "/c";
    fs::copy(Pristine(), dir_, fs::copy_options::recursive);
  }
  const std::string& dir() const { return dir_; }
  std::string file(const std::string& name) const { return dir_ + "/" + name; }
  Json manifest() const { return Json::parse(Slurp(file("manifest.json"))); }
  void set_manifest(const Json& m) const { Spit(file("manifest.json"), m.dump(1)); }
  Json& Tensor(Json& m, const std::string& name) const {
    for (Json& t : m["trunk"]) {
      if (t["name"] == name) return t;
    }
    ADD_FAILURE() << "no tensor " << name;
    return m;
  }
  // Overwrites bytes of a file in place.
  void Patch(const std::string& name, uint64_t off, const void* p, size_t n) const {
    std::fstream f(file(name), std::ios::binary | std::ios::in | std::ios::out);
    f.seekp(static_cast<std::streamoff>(off));
    f.write(static_cast<const char*>(p), static_cast<std::streamsize>(n));
  }

 private:
  std::string dir_;
};

Status OpenStatus(const std::string& dir, Config c = {}) {
  c.ram_budget_bytes = 64ull << 20;
  auto e = Engine::Open(dir, c);
  return e ? Status::Ok() : e.error();
}

// --- 1, 4: the file-reading rule -------------------------------------------------

TEST(ReadRegularFile, RefusesDirectoriesFifosAndDevicesWithoutBlocking) {
  TempDir t;
  auto dir = ReadRegularFile(t.path(), 1 << 20, "prompt file");
  ASSERT_FALSE(dir);
  EXPECT_TRUE(Has(dir.error().message(), ": a directory, not a regular file")) << dir.error().message();

  std::string fifo = t / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto f = ReadRegularFile(fifo, 1 << 20, "chat template");  // would block before the fix
  ASSERT_FALSE(f);
  EXPECT_TRUE(Has(f.error().message(), "FIFO")) << f.error().message();

  auto zero = ReadRegularFile("/dev/zero", 1 << 20, "specials");
  ASSERT_FALSE(zero);
  EXPECT_TRUE(Has(zero.error().message(), "character device")) << zero.error().message();
}

TEST(ReadRegularFile, SizeLimitBeforeReadingAndMissing) {
  TempDir t;
  std::string big = t / "sparse";
  int fd = ::open(big.c_str(), O_CREAT | O_WRONLY, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, off_t{2} << 30), 0);  // 2 GB sparse: refused from its size
  ::close(fd);
  auto r = ReadRegularFile(big, 1 << 20, "session file");
  ASSERT_FALSE(r);
  EXPECT_TRUE(Has(r.error().message(), "more than the 1048576")) << r.error().message();

  Spit(t / "ok", "hello");
  auto ok = ReadRegularFile(t / "ok", 5, "prompt file");
  ASSERT_TRUE(ok);
  EXPECT_EQ(*ok, "hello");
  bool missing = false;
  EXPECT_FALSE(ReadRegularFile(t / "nope", 5, "x", &missing));
  EXPECT_TRUE(missing);
}

TEST(Hardening, SidecarThatIsDevZeroIsRefusedAtOpen) {
  Copy c;
  fs::remove(c.file("specials.json"));
  fs::create_symlink("/dev/zero", c.file("specials.json"));
  Status st = OpenStatus(c.dir());
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(Has(st.message(), "not a regular file")) << st.message();
}

TEST(Hardening, ChatJsonFifoDoesNotHang) {
  Copy c;
  fs::remove(c.file("chat.json"));
  ASSERT_EQ(::mkfifo(c.file("chat.json").c_str(), 0600), 0);
  auto t = ChatTemplate::Load(c.dir());
  ASSERT_FALSE(t);
  EXPECT_TRUE(Has(t.error().message(), "FIFO")) << t.error().message();
}

// --- 2, 11, 12: the file-writing rule -----------------------------------------------

TEST(ReplaceFile, RefusesWhatIsNotAFileOfTheSameKind) {
  TempDir t;
  const std::string data = "WDAS-new";
  EXPECT_TRUE(platform::ReplaceFile(t / "s", data.data(), data.size(), "session file", "WDAS").ok());
  EXPECT_EQ(Slurp(t / "s"), data);  // nothing there: created
  EXPECT_TRUE(platform::ReplaceFile(t / "s", data.data(), data.size(), "session file", "WDAS").ok());

  Spit(t / "manifest.json", "{\"format_version\":0}");
  Status st = platform::ReplaceFile(t / "manifest.json", data.data(), data.size(), "session file",
                                    "WDAS");
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(Slurp(t / "manifest.json"), "{\"format_version\":0}");

  ASSERT_EQ(::mkfifo((t / "fifo").c_str(), 0600), 0);
  st = platform::ReplaceFile(t / "fifo", data.data(), data.size(), "session file", "WDAS");
  EXPECT_FALSE(st.ok());
  EXPECT_TRUE(Has(st.message(), "FIFO")) << st.message();
  struct stat sb;
  ASSERT_EQ(::lstat((t / "fifo").c_str(), &sb), 0);
  EXPECT_TRUE(S_ISFIFO(sb.st_mode));

  fs::create_symlink(t / "s", t / "link");
  st = platform::ReplaceFile(t / "link", data.data(), data.size(), "session file", "WDAS");
  EXPECT_TRUE(Has(st.message(), "symbolic link")) << st.message();
  EXPECT_TRUE(fs::is_symlink(t / "link"));

  fs::create_directory(t / "d");
  st = platform::WriteFileAtomic(t / "d", data.data(), data.size());
  EXPECT_TRUE(Has(st.message(), "directory")) << st.message();
}

TEST(ReplaceFile, RemovesStaleTempsOfDeadProcessesOnly) {
  TempDir t;
  pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ASSERT_GT(child, 0);
  ::waitpid(child, nullptr, 0);  // `child` is now a pid nobody has
  std::string stale = t / ("usage.waste.tmp." + std::to_string(child) + ".0");
  std::string live = t / ("usage.waste.tmp." + std::to_string(::getppid()) + ".0");
  Spit(stale, "x");
  Spit(live, "x");
  const std::string data = "WUSG";
  ASSERT_TRUE(platform::ReplaceFile(t / "usage.waste", data.data(), 4, "usage.waste", "WUSG").ok());
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists(live));
}

TEST(Hardening, HotlistNeverReplacesTheManifest) {
  Copy c;
  const std::string before = Slurp(c.file("manifest.json"));
  Config cfg;
  cfg.ram_budget_bytes = 64ull << 20;
  auto e = Engine::Open(c.dir(), cfg);
  ASSERT_TRUE(e) << e.error().message();
  std::vector<int> prompt = {1, 2, 3};
  ASSERT_TRUE((*e)->Generate(prompt, GenParams{2}, nullptr).has_value());
  Status st = (*e)->SaveUsage(c.file("manifest.json"));
  EXPECT_FALSE(st.ok());
  EXPECT_TRUE(Has(st.message(), "not a usage.waste")) << st.message();
  EXPECT_EQ(Slurp(c.file("manifest.json")), before);
  EXPECT_TRUE((*e)->SaveUsage().ok());           // the real hotlist: created
  EXPECT_TRUE((*e)->SaveUsage().ok());           // and replaced
}

TEST(Hardening, HotlistWriteFailuresAreReported) {
  Copy c;
  Config cfg;
  cfg.ram_budget_bytes = 64ull << 20;
  auto e = Engine::Open(c.dir(), cfg);
  ASSERT_TRUE(e);
  Status missing_dir = (*e)->SaveUsage(c.dir() + "/no-such-dir/usage.waste");
  EXPECT_FALSE(missing_dir.ok());
  EXPECT_TRUE(Has(missing_dir.message(), "no-such-dir")) << missing_dir.message();
}

TEST(Hardening, HotlistOnAReadOnlyDirectoryIsReported) {
  if (::geteuid() == 0) GTEST_SKIP() << "root writes into read-only directories";
  Copy c;
  Config cfg;
  cfg.ram_budget_bytes = 64ull << 20;
  auto e = Engine::Open(c.dir(), cfg);
  ASSERT_TRUE(e);
  fs::permissions(c.dir(), fs::perms::owner_read | fs::perms::owner_exec);
  Status st = (*e)->SaveUsage();
  fs::permissions(c.dir(), fs::perms::owner_all);
  EXPECT_FALSE(st.ok());
}

// --- 3: --exclusive-open ------------------------------------------------------------

TEST(Hardening, SecondExclusiveOpenFromAnotherProcessIsBusy) {
  Copy c;
  auto lock = platform::DirLock::Acquire(c.dir());
  ASSERT_TRUE(lock);
  ASSERT_TRUE(lock->held());
  // The same process shares its lock.
  auto again = platform::DirLock::Acquire(c.dir());
  ASSERT_TRUE(again);
  EXPECT_TRUE(again->held());
  pid_t child = ::fork();
  if (child == 0) {
    Config cfg;
    cfg.exclusive_open = true;
    Status st = OpenStatus(c.dir(), cfg);
    bool busy = st.code() == Errc::kBusy && Has(st.message(), "already open in another process");
    Config shared;  // without the flag the open goes on
    bool plain_ok = OpenStatus(c.dir(), shared).ok();
    ::_exit(busy && plain_ok ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  // Released: now another process gets it.
  *lock = platform::DirLock();
  *again = platform::DirLock();
  child = ::fork();
  if (child == 0) {
    Config cfg;
    cfg.exclusive_open = true;
    ::_exit(OpenStatus(c.dir(), cfg).ok() ? 0 : 1);
  }
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

// --- 5: parsing memory bounded ------------------------------------------------------

TEST(Hardening, OversizedManifestAndHugeNumbersAreRefusedBriefly) {
  Copy c;
  {
    int fd = ::open(c.file("manifest.json").c_str(), O_WRONLY);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::ftruncate(fd, static_cast<off_t>(kMaxManifestBytes + 1)), 0);
    ::close(fd);
  }
  Status st = OpenStatus(c.dir());
  EXPECT_TRUE(Has(st.message(), "more than the")) << st.message();

  std::string digits(1000000, '7');
  Json m = Copy().manifest();
  std::string text = m.dump();
  text.replace(text.find("\"num_hidden_layers\":") + 20, 1, digits + "x");
  auto parsed = ParseManifest(text);
  ASSERT_FALSE(parsed);
  EXPECT_LT(parsed.error().message().size(), 600u) << parsed.error().message().substr(0, 600);
  text = m.dump();
  size_t at = text.find("\"num_hidden_layers\":") + 20;
  text.replace(at, text.find(',', at) - at, "1e300");  // parses, then saturates
  parsed = ParseManifest(text);
  ASSERT_FALSE(parsed);
  EXPECT_LT(parsed.error().message().size(), 600u);
  EXPECT_TRUE(Has(parsed.error().message(), "2^62 or more")) << parsed.error().message();
}

// --- 6: finite checks ---------------------------------------------------------------

TEST(Hardening, NanCodebookIsRefusedAtOpen) {
  Copy c;
  const uint16_t nan = 0x7e00;
  c.Patch("codebooks.bin", format::kCodebookHeaderBytes + 2 * 5, &nan, 2);  // entry 5 of record 0
  Status st = OpenStatus(c.dir());
  EXPECT_EQ(st.code(), Errc::kFormat);
  EXPECT_TRUE(Has(st.message(), "codebooks.bin: record 0")) << st.message();
}

TEST(Hardening, NonFiniteF32TrunkTensorAndScalesAreRefusedAtOpen) {
  Copy c;
  Json m = c.manifest();
  uint64_t off = c.Tensor(m, "model.norm.weight")["off"];
  const float inf = std::numeric_limits<float>::infinity();
  c.Patch("trunk.bin", off + 4 * 7, &inf, 4);
  Status st = OpenStatus(c.dir());
  EXPECT_TRUE(Has(st.message(), "\"model.norm.weight\" value 7")) << st.message();

  Copy d;
  Json dm = d.manifest();
  for (Json& t : dm["trunk"]) {
    // A resident quantized tensor (the embedding may stay on disk).
    std::string name = t["name"];
    if (t["fmt"] != 0 && t.contains("scale_off") && name.find("layers.") != std::string::npos) {
      const uint16_t nan = 0xfe00;
      d.Patch("trunk.bin", t["scale_off"].get<uint64_t>() + 2, &nan, 2);
      st = OpenStatus(d.dir());
      EXPECT_TRUE(Has(st.message(), "scale 1 of")) << st.message();
      return;
    }
  }
  ADD_FAILURE() << "no quantized trunk tensor";
}

TEST(Hardening, NonFiniteLogitsEndGenerationWithAnError) {
  Copy c;
  Config cfg;
  cfg.ram_budget_bytes = 64ull << 20;
  std::string layout_error;
  {
    auto probe = Container::Open(c.dir());
    ASSERT_TRUE(probe);
    const auto& layout = (*probe)->record_layout();
    // Every expert scale of every bank set to NaN (records are read on
    // demand, so the open-time check cannot see them).
    for (int l = 0; l < (*probe)->config().n_layers; ++l) {
      if (!(*probe)->is_moe_layer(l)) continue;
      const BankInfo& b = (*probe)->bank(l);
      std::vector<uint16_t> nans((layout.payload_end - layout.scales_off) / 2, 0x7e00);
      for (int e = 0; e < b.experts; ++e) {
        c.Patch(b.file, static_cast<uint64_t>(e) * b.record_bytes + layout.scales_off, nans.data(),
                nans.size() * 2);
      }
    }
  }
  auto e = Engine::Open(c.dir(), cfg);
  ASSERT_TRUE(e) << e.error().message();
  std::vector<int> prompt = {1, 2, 3};
  std::vector<int> got;
  Result<FinishReason> st = (*e)->Generate(prompt, GenParams{4}, [&](const TokenEvent& ev) {
    got.push_back(ev.token);
    return true;
  });
  EXPECT_FALSE(st.has_value());
  EXPECT_TRUE(Has(st.error().message(), "not finite")) << st.error().message();
  EXPECT_TRUE(got.empty());
  auto logits = (*e)->Eval(prompt);
  EXPECT_FALSE(logits);
}

TEST(Hardening, RopeThetaOutOfRangeIsRefused) {
  Json m = Copy().manifest();
  m["config"]["mla_use_nope"] = false;
  m["config"]["rope_theta"] = 1e-300;
  auto parsed = ParseManifest(m.dump());
  ASSERT_FALSE(parsed);
  EXPECT_TRUE(Has(parsed.error().message(), "rope_theta")) << parsed.error().message();
  m["config"]["rope_theta"] = 10000.0;
  EXPECT_TRUE(ParseManifest(m.dump()));
}

// --- 7: floor above usable RAM ------------------------------------------------------

TEST(Hardening, FloorAboveUsableRamNamesBoth) {
  MemPlan p;
  p.ctx = 1000000000;
  p.floor_bytes = uint64_t{400} << 30;
  p.recommended_bytes = p.floor_bytes;
  p.usable_ram_bytes = uint64_t{16} << 30;
  p.usable_ram_source = "physical";
  auto r = ResolveBudget(p, 0);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), Errc::kRamBudget);
  EXPECT_TRUE(Has(r.error().message(), "400.00 GiB")) << r.error().message();
  EXPECT_TRUE(Has(r.error().message(), "16.00 GiB")) << r.error().message();

  // Rounded sizes that print equal come with exact bytes.
  MemPlan q;
  q.floor_bytes = 149 * 1024 * 1024 + 100;
  q.recommended_bytes = q.floor_bytes;
  auto below = ResolveBudget(q, 149 * 1024 * 1024);
  ASSERT_FALSE(below);
  EXPECT_TRUE(Has(below.error().message(), "156237924 bytes")) << below.error().message();
}

TEST(Hardening, ContextWhoseFloorExceedsRamIsRefusedAtOpen) {
  Copy c;
  Config cfg;  // default budget
  cfg.ctx_tokens = 2000000000;
  auto e = Engine::Open(c.dir(), cfg);
  ASSERT_FALSE(e);
  EXPECT_EQ(e.error().code(), Errc::kRamBudget) << e.error().message();
  EXPECT_TRUE(Has(e.error().message(), "floor")) << e.error().message();
}

// --- 9, 10: load checks -------------------------------------------------------------

TEST(Hardening, ConvKernelMustEqualTheStoredOne) {
  Copy c;
  Json m = c.manifest();
  m["config"]["linear_attn_config"]["short_conv_kernel_size"] = 3;
  c.set_manifest(m);
  Status st = OpenStatus(c.dir());
  EXPECT_EQ(st.code(), Errc::kFormat);
  EXPECT_TRUE(Has(st.message(), "conv1d")) << st.message();
}

TEST(Hardening, NullMlaUseNopeIsRefused) {
  Json m = Copy().manifest();
  m["config"]["mla_use_nope"] = nullptr;
  auto parsed = ParseManifest(m.dump());
  ASSERT_FALSE(parsed);
  EXPECT_TRUE(Has(parsed.error().message(), "mla_use_nope is null")) << parsed.error().message();
}

TEST(Hardening, NormOfShape128x1IsNotAVector) {
  Copy c;
  Json m = c.manifest();
  c.Tensor(m, "model.norm.weight")["shape"] = Json::array({128, 1});
  c.set_manifest(m);
  Status st = OpenStatus(c.dir());
  EXPECT_TRUE(Has(st.message(), "model.norm.weight")) << st.message();
}

TEST(Hardening, TokenizerIdsBeyondTheVocabularyAreRefusedAtOpen) {
  Copy c;
  Json s = Json::parse(Slurp(c.file("specials.json")));
  int vocab = c.manifest()["config"]["vocab_size"];
  s.push_back({{"id", vocab + 3}, {"text", "<|beyond|>"}});
  Spit(c.file("specials.json"), s.dump());
  Status st = OpenStatus(c.dir());
  EXPECT_EQ(st.code(), Errc::kFormat);
  EXPECT_TRUE(Has(st.message(), "vocab_size")) << st.message();
}

// --- state files: the container they came from, the read/write rules ----------------

TEST(Hardening, StateNamesItsContainer) {
  Copy a;
  Copy b;  // same geometry, another manifest (one more byte)
  Spit(b.file("manifest.json"), Slurp(b.file("manifest.json")) + "\n");
  Config cfg;
  cfg.ram_budget_bytes = 64ull << 20;
  auto ea = Engine::Open(a.dir(), cfg);
  auto eb = Engine::Open(b.dir(), cfg);
  ASSERT_TRUE(ea && eb);
  std::vector<int> prompt = {1, 2, 3};
  ASSERT_TRUE((*ea)->Eval(prompt));
  std::string path = a / "s.state";
  ASSERT_TRUE((*ea)->SaveState(path).ok());
  Status st = (*eb)->LoadState(path);
  EXPECT_EQ(st.code(), Errc::kFormat);
  EXPECT_TRUE(Has(st.message(), "another container")) << st.message();
  EXPECT_TRUE((*eb)->LoadState(path, /*any_container=*/true).ok());
  EXPECT_TRUE((*ea)->LoadState(path).ok());
  // A file the reference wrote (reserved words 0) loads anywhere it fits.
  std::string bytes = Slurp(path);
  std::memset(bytes.data() + 56, 0, 8);
  Spit(path, bytes);
  EXPECT_TRUE((*eb)->LoadState(path).ok());

  // Never read: a device, a directory; never replaced: a non-state file.
  EXPECT_FALSE((*ea)->LoadState("/dev/zero").ok());
  EXPECT_FALSE((*ea)->LoadState(a.path()).ok());
  Spit(a / "notes.txt", "keep me");
  EXPECT_FALSE((*ea)->SaveState(a / "notes.txt").ok());
  EXPECT_EQ(Slurp(a / "notes.txt"), "keep me");
  ASSERT_EQ(::mkfifo((a / "fifo").c_str(), 0600), 0);
  EXPECT_FALSE((*ea)->SaveState(a / "fifo").ok());
  EXPECT_TRUE(fs::is_fifo(a / "fifo"));
}

TEST(Hardening, HugeSparseStateIsRefusedBeforeReading) {
  Copy c;
  Config cfg;
  cfg.ram_budget_bytes = 64ull << 20;
  auto e = Engine::Open(c.dir(), cfg);
  ASSERT_TRUE(e);
  std::string path = c / "big.state";
  ASSERT_TRUE((*e)->SaveState(path).ok());
  int fd = ::open(path.c_str(), O_WRONLY);
  ASSERT_EQ(::ftruncate(fd, off_t{2} << 30), 0);
  ::close(fd);
  Status st = (*e)->LoadState(path);
  EXPECT_FALSE(st.ok());
  EXPECT_TRUE(Has(st.message(), "more than the")) << st.message();
}

// --- 13: messages ------------------------------------------------------------------

TEST(Hardening, ReadErrorsArePrefixedOnce) {
  Copy c;
  Config cfg;
  cfg.ram_budget_bytes = 64ull << 20;
  cfg.direct_io = 0;
  auto e = Engine::Open(c.dir(), cfg);
  ASSERT_TRUE(e) << e.error().message();
  for (const auto& f : fs::directory_iterator(c.dir())) {
    if (f.path().filename().string().rfind("experts-", 0) == 0) fs::resize_file(f.path(), 0);
  }
  std::vector<int> prompt = {1, 2, 3};
  Result<FinishReason> gen = (*e)->Generate(prompt, GenParams{2}, nullptr);
  ASSERT_FALSE(gen.has_value());
  const Status& st = gen.error();
  EXPECT_TRUE(Has(st.message(), "short read")) << st.message();
  EXPECT_FALSE(Has(st.message(), "short read (")) << st.message();
}

TEST(Hardening, CpuListErrorsDoNotCarryTheCliFlag) {
  Copy c;
  Config cfg;
  cfg.cpu_list = "1000";  // parses, but no machine here has it
  Status st = OpenStatus(c.dir(), cfg);
  ASSERT_FALSE(st.ok());
  EXPECT_FALSE(Has(st.message(), "--cpus")) << st.message();
}

}  // namespace
}  // namespace waste
