#include "config_help.h"

#include <sstream>
#include <utility>
#include <vector>

namespace mantissa::app {
namespace {

bool is_help(const CLI::Option* opt) { return opt->check_lname("help"); }

class ConfigListingFormatter : public CLI::Formatter {
 public:
  ConfigListingFormatter(const CLI::Option* config, std::string description)
      : config_(config), description_(std::move(description)) {}

  std::string make_group(std::string group, bool is_positional,
                         std::vector<const CLI::Option*> opts) const override {
    if (is_positional || group != "Options") {
      return CLI::Formatter::make_group(std::move(group), is_positional, std::move(opts));
    }
    std::ostringstream out;
    out << "\n" << group << ":\n";
    bool listed = false;
    for (const CLI::Option* opt : opts) {
      // First after --help (CLI11 lists it first), or first of all without one.
      if (!listed && !is_help(opt)) {
        out << config_line();
        listed = true;
      }
      out << make_option(opt, false);
    }
    if (!listed) out << config_line();
    return out.str();
  }

 private:
  std::string config_line() const {
    std::ostringstream line;
    CLI::detail::format_help(line, make_option_name(config_, false) + make_option_opts(config_),
                             description_, get_column_width());
    return line.str();
  }

  const CLI::Option* config_;
  std::string description_;
};

}  // namespace

std::shared_ptr<CLI::Formatter> formatter_listing_config(const CLI::Option* config,
                                                         std::string description) {
  return std::make_shared<ConfigListingFormatter>(config, std::move(description));
}

}  // namespace mantissa::app
