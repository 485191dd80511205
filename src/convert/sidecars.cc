// The small files: tokenizer.model (a byte copy of the release's tiktoken
// ranks, or converted from a Hugging Face tokenizer.json together with
// pretokenizer.json), specials.json (every added token, raw UTF-8, sorted by id),
// chat_template.jinja (the release's template as text, unwrapped from its
// JSON container when needed), chat.json (the family's turn markers, only
// when every marker is one of the checkpoint's special tokens) and, for K3
// with a vision tower, vision.json.
#include <fmt/format.h>

#include <algorithm>
#include <exception>
#include <map>

#include <nlohmann/json.hpp>

#include "convert/hf_tokenizer.h"
#include "convert/passes.h"
#include "platform/platform.h"
#include "waste/files.h"
#include "base/exception_status.h"

namespace waste::convert {
namespace {

using OJson = nlohmann::ordered_json;

Status Put(const std::string& out_dir, const std::string& name, const std::string& bytes) {
  return PublishBytes(JoinPath(out_dir, name), bytes);
}

// A template given as a list of {name, template} picks "default" (else the first).
std::string TemplateText(const OJson& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_array()) {
    for (const OJson& e : v) {
      if (e.is_object() && e.value("name", "") == "default" && e.contains("template") &&
          e["template"].is_string()) {
        return e["template"].get<std::string>();
      }
    }
    if (!v.empty() && v[0].is_object() && v[0].contains("template") && v[0]["template"].is_string()) {
      return v[0]["template"].get<std::string>();
    }
  }
  return {};
}

OJson ChatFor(TurnMarkers markers) {
  if (markers == TurnMarkers::kOpenTags) {
    auto turn = [](const std::string& role) {
      return OJson::array({fmt::format("<|open|>message role=\"{}\"<|sep|>", role),
                           "<|close|>message<|sep|><|end_of_msg|>"});
    };
    return OJson{{"system", turn("system")},
                 {"user", turn("user")},
                 {"assistant", OJson::array({"<|open|>message role=\"assistant\"<|sep|><|open|>response<|sep|>",
                                             "<|close|>response<|sep|><|close|>message<|sep|><|end_of_msg|>"})},
                 {"open", "<|open|>message role=\"assistant\"<|sep|><|open|>response<|sep|>"}};
  }
  return OJson{{"system", OJson::array({"<|im_system|>system<|im_middle|>", "<|im_end|>"})},
               {"user", OJson::array({"<|im_user|>user<|im_middle|>", "<|im_end|>"})},
               {"assistant", OJson::array({"<|im_assistant|>assistant<|im_middle|>", "<|im_end|>"})},
               {"open", "<|im_assistant|>assistant<|im_middle|>"}};
}

// Every <|...|> marker of the chat file is a special token.
bool MarkersAreSpecials(const OJson& chat, const std::vector<std::string>& specials) {
  const std::string text = chat.dump();
  for (size_t p = text.find("<|"); p != std::string::npos; p = text.find("<|", p + 2)) {
    const size_t e = text.find("|>", p);
    if (e == std::string::npos) return false;
    const std::string marker = text.substr(p, e + 2 - p);
    if (std::find(specials.begin(), specials.end(), marker) == specials.end()) return false;
  }
  return true;
}

}  // namespace

Result<HfTokenizerFiles> LoadHfTokenizer(const std::string& src) {
  const std::string path = JoinPath(src, "tokenizer.json");
  WASTE_ASSIGN_OR_RETURN(std::string text, platform::ReadRegularFile(path, kMaxTokenizerBytes, "tokenizer.json"));
  // config.json's bos_token_id (DeepSeek: 0) is the BOS the release prepends.
  int bos_id = -1;
  if (auto cfg = platform::ReadRegularFile(JoinPath(src, "config.json"), kMaxSidecarBytes, "config")) {
    const OJson j = OJson::parse(*cfg, nullptr, /*allow_exceptions=*/false);
    if (j.is_object() && j.contains("bos_token_id") && j["bos_token_id"].is_number_integer()) {
      const int64_t b = j["bos_token_id"].get<int64_t>();
      if (b >= 0 && b < 0x7FFFFFFF) bos_id = static_cast<int>(b);
    }
  }
  return ConvertHfTokenizer(text, path, bos_id);
}

Result<std::vector<std::string>> WriteSidecars(const Checkpoint& ckpt, const SourceModel& model,
                                               const std::string& out_dir) {
  std::vector<std::string> written;
  const std::string& src = ckpt.dir();
  for (const char* name : {"tiktoken.model", "tokenizer.model"}) {
    const std::string p = JoinPath(src, name);
    if (!platform::PathExists(p)) continue;
    WASTE_ASSIGN_OR_RETURN(std::string bytes, platform::ReadWholeFile(p));
    WASTE_TRY(Put(out_dir, "tokenizer.model", bytes));
    written.push_back("tokenizer.model");
    break;
  }
  // No tiktoken ranks: a byte-level BPE tokenizer.json (DeepSeek-V3/R1)
  // becomes ranks, specials and the release's own pre-tokenizer rules.
  bool specials_from_hf = false;
  const std::string hf_path = JoinPath(src, "tokenizer.json");
  if (written.empty() && platform::PathExists(hf_path)) {
    WASTE_ASSIGN_OR_RETURN(HfTokenizerFiles hf, LoadHfTokenizer(src));
    WASTE_TRY(Put(out_dir, "tokenizer.model", hf.rank_file));
    WASTE_TRY(Put(out_dir, "pretokenizer.json", hf.pretokenizer_json));
    written.push_back("tokenizer.model");
    written.push_back("pretokenizer.json");
    if (!hf.specials_json.empty()) {
      WASTE_TRY(Put(out_dir, "specials.json", hf.specials_json));
      written.push_back("specials.json");
    }
    specials_from_hf = true;
  }

  std::vector<std::string> special_texts;
  std::string chat_template;
  const std::string tc_path = JoinPath(src, "tokenizer_config.json");
  if (platform::PathExists(tc_path)) {
    WASTE_ASSIGN_OR_RETURN(std::string text, platform::ReadWholeFile(tc_path));
    try {
      OJson tc = OJson::parse(text);
      // tokenizer.json's added tokens win: they are the ids its ranks leave out.
      if (!specials_from_hf && tc.contains("added_tokens_decoder") && tc["added_tokens_decoder"].is_object()) {
        std::map<long long, std::string> by_id;
        for (auto it = tc["added_tokens_decoder"].begin(); it != tc["added_tokens_decoder"].end(); ++it) {
          const long long id = std::stoll(it.key());
          if (id < 0 || id > 0x7FFFFFFF) throw std::runtime_error("added token id " + it.key());
          by_id[id] = it.value().at("content").get<std::string>();
        }
        OJson arr = OJson::array();
        for (const auto& [id, t] : by_id) {
          arr.push_back(OJson{{"id", id}, {"text", t}});
          special_texts.push_back(t);
        }
        if (!arr.empty()) {
          // Raw UTF-8 (dump never escapes non-ASCII): the engine does not unescape.
          WASTE_TRY(Put(out_dir, "specials.json", arr.dump(1) + "\n"));
          written.push_back("specials.json");
        }
      }
      if (tc.contains("chat_template")) chat_template = TemplateText(tc["chat_template"]);
    } catch (const std::exception& e) {
      return StatusFromException(e, Errc::kFormat, fmt::format("{}: {}", tc_path, e.what()));
    }
  }
  if (platform::PathExists(JoinPath(src, "chat_template.jinja"))) {
    WASTE_ASSIGN_OR_RETURN(chat_template, platform::ReadWholeFile(JoinPath(src, "chat_template.jinja")));
  } else if (platform::PathExists(JoinPath(src, "chat_template.json"))) {
    WASTE_ASSIGN_OR_RETURN(std::string text, platform::ReadWholeFile(JoinPath(src, "chat_template.json")));
    try {
      OJson j = OJson::parse(text);
      chat_template = TemplateText(j.is_object() && j.contains("chat_template") ? j["chat_template"] : j);
    } catch (const std::exception& e) {
      return StatusFromException(e, Errc::kFormat, fmt::format("{}/chat_template.json: {}", src, e.what()));
    }
  }
  if (!chat_template.empty()) {
    WASTE_TRY(Put(out_dir, "chat_template.jinja", chat_template));
    written.push_back("chat_template.jinja");
  }
  if (model.family->turn_markers != TurnMarkers::kNone && !special_texts.empty()) {
    OJson chat = ChatFor(model.family->turn_markers);
    if (MarkersAreSpecials(chat, special_texts)) {
      WASTE_TRY(Put(out_dir, "chat.json", chat.dump(1) + "\n"));
      written.push_back("chat.json");
    }
  }
  if (model.outer.is_object() && model.outer.contains("vision_config") &&
      model.outer["vision_config"].is_object()) {
    OJson v = OJson::object();
    for (auto it = model.outer["vision_config"].begin(); it != model.outer["vision_config"].end(); ++it) {
      if (!it.key().starts_with("_")) v[it.key()] = it.value();
    }
    v["vt_rms_eps"] = 1.1920928955078125e-07;
    if (model.outer.contains("media_placeholder_token_id")) {
      v["media_placeholder_token_id"] = model.outer["media_placeholder_token_id"];
    }
    v["max_patches"] = 1024;
    v["image_mean"] = OJson::array({0.5, 0.5, 0.5});
    v["image_std"] = OJson::array({0.5, 0.5, 0.5});
    const std::string pp = JoinPath(src, "preprocessor_config.json");
    if (platform::PathExists(pp)) {
      WASTE_ASSIGN_OR_RETURN(std::string text, platform::ReadWholeFile(pp));
      try {
        OJson p = OJson::parse(text);
        const OJson& m = p.contains("media_proc_cfg") ? p["media_proc_cfg"] : p;
        for (const char* k : {"image_mean", "image_std", "patch_size", "in_patch_limit",
                              "patch_limit_on_one_side"}) {
          if (m.contains(k) && !m[k].is_null()) v[k] = m[k];
        }
      } catch (const std::exception& e) {
        return StatusFromException(e, Errc::kFormat, fmt::format("{}: {}", pp, e.what()));
      }
    }
    WASTE_TRY(Put(out_dir, "vision.json", v.dump(1) + "\n"));
    written.push_back("vision.json");
  }
  return written;
}

}  // namespace waste::convert
