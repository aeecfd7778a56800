#pragma once
// How the console lines (epoch summaries, validation lines, eval results) print a loss: four
// decimals, as Lightning's progress bar does, except where that would not read as a number
// (a diverging run's 1e135 with 130 digits), and NaN without a sign.
#include <string>

namespace mantissa::train {

// "2.4672"; "5.3153e+14" from 1e6 in magnitude; "nan", "inf", "-inf".
std::string metric_text(double value);

}  // namespace mantissa::train
