#include "flag_attribution.h"

#include <fmt/format.h>

#include <cctype>
#include <string>

namespace mantissa::app {
namespace {

// The subcommand that ran (train, eval, ...), or `app` itself.
const CLI::App* command_that_ran(const CLI::App& app) {
  for (const CLI::App* sub : app.get_subcommands()) return sub;
  return &app;
}

bool is_word_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '.' || c == '_';
}

// Whether `message` quotes `value`: as a whole value, a path inside it or a list item, or as the
// number a check got ("got -7").
bool quotes(const std::string& message, const std::string& value) {
  for (const std::string& form : {"'" + value + "'", "'" + value + "/", "[" + value + "]"})
    if (message.find(form) != std::string::npos) return true;
  // A directory given with its trailing slash, a file inside it quoted.
  if (value.ends_with('/') && message.find("'" + value) != std::string::npos) return true;
  // A long value may be quoted cut short (quote_untrusted, escape_untrusted): its start, then
  // "... (N bytes)" with its length. Its start alone is no match: another path in the same
  // directory starts alike (--data's directory named for a missing --adapter's file).
  constexpr size_t kQuotedStart = 40;
  if (value.size() > kQuotedStart) {
    const std::string start = "'" + value.substr(0, kQuotedStart);
    const std::string cut = fmt::format("... ({} bytes)'", value.size());
    for (size_t at = message.find(start); at != std::string::npos;
         at = message.find(start, at + 1)) {
      const size_t close = message.find('\'', at + start.size());
      if (close != std::string::npos && close + 1 >= cut.size() &&
          message.compare(close + 1 - cut.size(), cut.size(), cut) == 0)
        return true;
    }
  }
  const std::string got = "got " + value;
  for (size_t at = message.find(got); at != std::string::npos; at = message.find(got, at + 1)) {
    const size_t end = at + got.size();
    if (end == message.size() || !is_word_char(message[end])) return true;
  }
  return false;
}

// The library's tag of `message` ("adapter" for "[adapter] ..."), or "".
std::string tag_of(const std::string& message) {
  if (!message.starts_with('[')) return "";
  const size_t close = message.find("] ");
  return close == std::string::npos ? "" : message.substr(1, close - 1);
}

}  // namespace

std::string name_flag_in_error(const CLI::App& app, const std::string& message) {
  const CLI::App* command = command_that_ran(app);
  const CLI::Option* best = nullptr;
  size_t best_length = 0;
  // Two flags given the same value (generate --model-dir DIR --adapter DIR) quote alike: the one
  // the library's tag names wins ("[adapter] cannot open 'DIR/adapter_config.json'").
  const std::string tag = tag_of(message);
  for (const CLI::Option* op : command->get_options()) {
    if (op->count() == 0 || op->get_lnames().empty()) continue;
    const std::string flag = "--" + op->get_lnames().front();
    if (message.find(flag) != std::string::npos) return message;
    const bool tagged = op->get_lnames().front() == tag;
    for (const std::string& value : op->results()) {
      if (value.empty() || value.size() < best_length || (value.size() == best_length && !tagged) ||
          !quotes(message, value))
        continue;
      best = op;
      best_length = value.size();
    }
  }
  if (best == nullptr) return message;
  // "[TextCorpus] '/dev/zero' is ..." becomes "[train] --text: '/dev/zero' is ...": the command
  // and its flag, then the library's account without its own tag.
  std::string what = message;
  if (what.starts_with('[')) {
    const size_t close = what.find("] ");
    if (close != std::string::npos) what.erase(0, close + 2);
  }
  return "[" + command->get_name() + "] --" + best->get_lnames().front() + ": " + what;
}

}  // namespace mantissa::app
