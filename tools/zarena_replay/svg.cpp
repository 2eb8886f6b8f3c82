#include "svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <vector>

#include "units.h"
#include "xml_text.h"

namespace zarena_replay {

namespace {

constexpr double kWidth = 1200, kHeight = 640;
constexpr double kLeft = 86, kRight = 200, kTop = 74, kBottom = 56;
constexpr double kPlotW = kWidth - kLeft - kRight, kPlotH = kHeight - kTop - kBottom;
constexpr size_t kMaxTagColours = 8;

const char* const kTagColours[kMaxTagColours] = {"#8dd3c7", "#bebada", "#fb8072", "#80b1d3",
                                                 "#fdb462", "#b3de69", "#fccde5", "#bc80bd"};
const char* const kOtherTagColour = "#d9d9d9";
const char* const kTopColour = "#1f4e9c";
const char* const kTopBand = "#c6d7f0";
const char* const kLiveColour = "#e6730f";
const char* const kCapacityColour = "#c0182a";
const char* const kResetColour = "#7a7a7a";
const char* const kBoundaryColour = "#2e8b3a";
const char* const kPinColour = "#7b3fa0";
const char* const kPlannedColour = "#2ca25f";

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

// 1, 2 or 5 times a power of ten, so that about `want` ticks span max.
double nice_step(double max, int want) {
  const double raw = max / want;
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (raw <= m * p) return m * p;
  }
  return 10 * p;
}

// Powers of two for byte axes: ticks people read as "2 GiB", "512 MiB".
double nice_byte_step(double max, int want) {
  const double raw = max / want;
  double step = 1;
  while (step < raw) step *= 2;
  // 1, 2, 4, 8 ... stays readable only up to 1024 of a unit; allow 256/512 steps.
  return step;
}

struct Column {
  bool any = false;
  uint64_t top_min = 0, top_max = 0, live_max = 0, planned_max = 0;
  uint8_t marks = 0;
};

class Svg {
 public:
  Svg() {
    out_ << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
         << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kWidth << "\" height=\""
         << kHeight << "\" viewBox=\"0 0 " << kWidth << " " << kHeight
         << "\" font-family=\"DejaVu Sans, Verdana, sans-serif\">\n";
  }
  void raw(const std::string& s) { out_ << s << "\n"; }
  void text(double x, double y, const std::string& s, const std::string& attrs) {
    out_ << "<text x=\"" << num(x) << "\" y=\"" << num(y) << "\" " << attrs << ">" << xml_escape(s)
         << "</text>\n";
  }
  void line(double x1, double y1, double x2, double y2, const std::string& attrs) {
    out_ << "<line x1=\"" << num(x1) << "\" y1=\"" << num(y1) << "\" x2=\"" << num(x2) << "\" y2=\""
         << num(y2) << "\" " << attrs << "/>\n";
  }
  void rect(double x, double y, double w, double h, const std::string& attrs) {
    out_ << "<rect x=\"" << num(x) << "\" y=\"" << num(y) << "\" width=\"" << num(w)
         << "\" height=\"" << num(h) << "\" " << attrs << "/>\n";
  }
  void path(const std::string& d, const std::string& attrs) {
    out_ << "<path d=\"" << d << "\" " << attrs << "/>\n";
  }
  std::string finish() {
    out_ << "</svg>\n";
    return out_.str();
  }

 private:
  std::ostringstream out_;
};

std::string shorten(const std::string& s, size_t n) {
  return s.size() <= n ? s : s.substr(0, n - 3) + "...";
}

}  // namespace

std::string render_svg(const PictureInput& in) {
  const ReplayResult& r = *in.result;
  const auto& tl = r.timeline;
  const uint64_t n = std::max<uint64_t>(tl.size(), 1);

  // Scale: up to the capacity whenever it is known (how much room was left is the point
  // of the picture); an "unlimited" replay of an RMM log has none.
  uint64_t ymax_bytes = std::max<uint64_t>({r.peak_top, r.peak_live, 1});
  const bool draw_capacity = in.capacity_known;
  if (draw_capacity) ymax_bytes = std::max(ymax_bytes, in.capacity_bytes);
  const double ystep = nice_byte_step(double(ymax_bytes) * 1.05, 6);
  const double ymax = std::ceil(double(ymax_bytes) * 1.05 / ystep) * ystep;
  auto X = [&](double event) { return kLeft + kPlotW * event / double(n); };
  auto Y = [&](double bytes) { return kTop + kPlotH * (1.0 - bytes / ymax); };

  // One column per horizontal pixel: min/max keep every peak visible however long the
  // trace is.
  const size_t ncol = static_cast<size_t>(kPlotW);
  std::vector<Column> cols(ncol);
  for (uint64_t i = 0; i < tl.size(); ++i) {
    Column& c = cols[std::min<size_t>(ncol - 1, static_cast<size_t>(i * ncol / n))];
    const Sample& s = tl[i];
    if (!c.any) {
      c.any = true;
      c.top_min = c.top_max = s.top;
      c.live_max = s.live;
    }
    c.top_min = std::min(c.top_min, s.top);
    c.top_max = std::max(c.top_max, s.top);
    c.live_max = std::max(c.live_max, s.live);
    c.planned_max = std::max(c.planned_max, s.planned);
    c.marks |= s.marks;
  }
  auto colx = [&](size_t c) { return kLeft + (double(c) + 0.5) * kPlotW / double(ncol); };

  Svg svg;
  svg.rect(0, 0, kWidth, kHeight, "fill=\"white\"");
  const std::string name = in.trace->info.arena_name;
  svg.text(kLeft, 28,
           "arena '" + shorten(name, 40) +
               "': " + (in.verdict == "fits" ? std::string("fits") : "verdict " + in.verdict) +
               (in.under_plan ? ", under step plans" : ""),
           "font-size=\"20\" font-weight=\"bold\" fill=\"" +
               std::string(in.verdict == "fits" ? "#222" : kCapacityColour) + "\"");
  std::string sub = std::to_string(tl.size()) + " events, " + std::to_string(r.allocs) +
                    " allocations, " + std::to_string(r.resets) + " resets; peak top " +
                    human_bytes(r.peak_top);
  if (in.under_plan && in.dynamic_peak_top != 0) {
    sub += " (without plans " + human_bytes(in.dynamic_peak_top) + ")";
  }
  if (in.capacity_known) sub += " of capacity " + human_bytes(in.capacity_bytes);
  if (r.overflow_allocs + r.refused > 0) {
    sub += "; " + std::to_string(r.overflow_allocs) + " overflow, " + std::to_string(r.refused) +
           " refused";
  }
  svg.text(kLeft, 50, sub, "font-size=\"13\" fill=\"#333\"");
  if (!in.advice.empty()) {
    svg.text(kLeft, 66, shorten(in.advice, 150), "font-size=\"11\" fill=\"#555\"");
  }

  // Axes and grid.
  svg.rect(kLeft, kTop, kPlotW, kPlotH, "fill=\"#fbfbfb\" stroke=\"#999\"");
  for (double v = 0; v <= ymax + 1; v += ystep) {
    svg.line(kLeft, Y(v), kLeft + kPlotW, Y(v), "stroke=\"#e3e3e3\"");
    svg.text(kLeft - 6, Y(v) + 4, human_bytes(static_cast<uint64_t>(v)),
             "font-size=\"11\" text-anchor=\"end\" fill=\"#444\"");
  }
  // The x axis runs over the events; with steps known its ticks name steps (step k at
  // the event that began it), which is what the reader counts.
  auto tick = [&](double x, double label) {
    svg.line(x, kTop + kPlotH, x, kTop + kPlotH + 4, "stroke=\"#666\"");
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.0f", label);
    svg.text(x, kTop + kPlotH + 17, buf, "font-size=\"11\" text-anchor=\"middle\" fill=\"#444\"");
  };
  const auto& steps = in.step_starts;
  std::string xtitle = "event (sequence order)";
  if (steps.size() >= 2) {
    const double sstep = std::max(1.0, nice_step(double(steps.size()), 8));
    for (double k = 0; k < double(steps.size()); k += sstep) {
      tick(X(double(steps[static_cast<size_t>(k)])), k + 1);
    }
    xtitle = "step (" + std::to_string(steps.size()) + " steps, " + in.steps_from + ")";
  } else {
    const double xstep = nice_step(double(n), 8);
    for (double v = 0; v <= double(n); v += xstep) tick(X(v), v);
  }
  svg.text(kLeft + kPlotW / 2, kHeight - 14, xtitle,
           "font-size=\"12\" text-anchor=\"middle\" fill=\"#333\"");

  // Live bytes by tag, stacked, under the lines.
  std::vector<std::pair<std::string, const char*>> legend_tags;
  const TagSeries& ts = r.tags;
  if (!ts.ids.empty() && !ts.bytes.empty()) {
    // The tags with the most bytes at their peak get colours; the rest share one. Layers
    // stack in the order the tags first held memory, so what lives longest (weights)
    // lies at the bottom.
    std::vector<std::pair<uint64_t, size_t>> rank;
    std::vector<size_t> first_seen(ts.ids.size(), ts.bytes.size());
    for (size_t k = 0; k < ts.ids.size(); ++k) {
      uint64_t peak = 0;
      for (size_t s = 0; s < ts.bytes.size(); ++s) {
        peak = std::max(peak, ts.bytes[s][k]);
        if (ts.bytes[s][k] > 0) first_seen[k] = std::min(first_seen[k], s);
      }
      if (peak > 0) rank.push_back({peak, k});
    }
    std::sort(rank.rbegin(), rank.rend());
    std::vector<size_t> coloured;
    for (size_t i = 0; i < rank.size() && i < kMaxTagColours; ++i)
      coloured.push_back(rank[i].second);
    std::sort(coloured.begin(), coloured.end(),
              [&](size_t a, size_t b) { return first_seen[a] < first_seen[b]; });
    std::vector<std::vector<size_t>> layers;
    for (size_t i = 0; i < coloured.size(); ++i) {
      layers.push_back({coloured[i]});
      legend_tags.push_back({in.trace->tags.at(ts.ids[coloured[i]]), kTagColours[i]});
    }
    if (rank.size() > kMaxTagColours) {
      layers.emplace_back();
      for (size_t i = kMaxTagColours; i < rank.size(); ++i) layers.back().push_back(rank[i].second);
      legend_tags.push_back({"other tags", kOtherTagColour});
    }
    std::vector<uint64_t> base(ts.bytes.size(), 0);
    for (size_t l = 0; l < layers.size(); ++l) {
      std::string d, back;
      for (size_t s = 0; s < ts.bytes.size(); ++s) {
        uint64_t v = 0;
        for (size_t k : layers[l]) v += ts.bytes[s][k];
        const double x = X(double(ts.events[s]));
        d += (s == 0 ? "M" : "L") + num(x) + "," + num(Y(double(base[s] + v))) + " ";
        back = "L" + num(x) + "," + num(Y(double(base[s]))) + " " + back;
        base[s] += v;
      }
      const char* colour =
          l < kMaxTagColours && l < legend_tags.size() ? legend_tags[l].second : kOtherTagColour;
      svg.path(d + back + "Z", "fill=\"" + std::string(colour) + "\" fill-opacity=\"0.75\"");
    }
  }

  // Planned blocks: their live bytes, from the bottom (the zone's blocks, whatever their
  // offsets), so the part of the live line the plan served shows at a glance.
  bool any_planned = false;
  for (const auto& c : cols) any_planned = any_planned || c.planned_max > 0;
  if (any_planned) {
    std::string d, back;
    bool first_col = true;
    for (size_t c = 0; c < ncol; ++c) {
      if (!cols[c].any) continue;
      const std::string x = num(colx(c));
      d += (first_col ? "M" : "L") + x + "," + num(Y(double(cols[c].planned_max))) + " ";
      back = "L" + x + "," + num(Y(0)) + " " + back;
      first_col = false;
    }
    svg.path(d + back + "Z", "class=\"planned\" fill=\"" + std::string(kPlannedColour) +
                                 "\" fill-opacity=\"0.55\" stroke=\"" + kPlannedColour + "\"");
  }

  // Resets and boundaries: one line per column at most. Resets in more than one column
  // in eight would grey the whole plot: they become a rug of ticks along its bottom.
  size_t reset_cols = 0;
  for (const auto& c : cols) reset_cols += (c.marks & kMarkReset) ? 1 : 0;
  const bool reset_rug = reset_cols * 8 > ncol;
  for (size_t c = 0; c < ncol; ++c) {
    if (cols[c].marks & kMarkReset) {
      const double y0 = reset_rug ? kTop + kPlotH - 7 : kTop;
      svg.line(colx(c), y0, colx(c), kTop + kPlotH,
               "stroke=\"" + std::string(kResetColour) + "\" stroke-opacity=\"" +
                   (reset_rug ? "0.8" : "0.45") + "\"");
    }
    if (cols[c].marks & kMarkBoundary) {
      svg.line(colx(c), kTop, colx(c), kTop + kPlotH,
               "stroke=\"" + std::string(kBoundaryColour) + "\" stroke-dasharray=\"6,3\"");
    }
  }

  // Top: the min..max band of each column, and its max line; live: its max line.
  std::string band_top, band_bottom, top_line, live_line;
  bool first = true;
  for (size_t c = 0; c < ncol; ++c) {
    if (!cols[c].any) continue;
    const std::string x = num(colx(c));
    band_top += (first ? "M" : "L") + x + "," + num(Y(double(cols[c].top_max))) + " ";
    band_bottom = "L" + x + "," + num(Y(double(cols[c].top_min))) + " " + band_bottom;
    top_line += (first ? "M" : "L") + x + "," + num(Y(double(cols[c].top_max))) + " ";
    live_line += (first ? "M" : "L") + x + "," + num(Y(double(cols[c].live_max))) + " ";
    first = false;
  }
  if (!first) {
    // With resets denser than the pixels, each column spans a whole step and the min..max
    // band would be a solid block: the peaks (the top line) tell the story alone.
    if (!reset_rug) {
      svg.path(band_top + band_bottom + "Z",
               "fill=\"" + std::string(kTopBand) + "\" fill-opacity=\"0.6\"");
    }
    // Live under top, wider: where they coincide (no holes, no overflow) both still show.
    svg.path(live_line, "fill=\"none\" stroke=\"" + std::string(kLiveColour) +
                            "\" stroke-width=\"3\" stroke-linejoin=\"round\"");
    svg.path(top_line, "fill=\"none\" stroke=\"" + std::string(kTopColour) +
                           "\" stroke-width=\"1.3\" stroke-linejoin=\"round\"");
  }

  if (draw_capacity) {
    const double y = Y(double(in.capacity_bytes));
    svg.line(kLeft, y, kLeft + kPlotW, y,
             "stroke=\"" + std::string(kCapacityColour) +
                 "\" stroke-width=\"1.5\" stroke-dasharray=\"8,4\"");
    svg.text(kLeft + 6, y - 5, "capacity " + human_bytes(in.capacity_bytes),
             "font-size=\"11\" fill=\"" + std::string(kCapacityColour) + "\"");
  }

  // Overflow (filled) and refused (hollow) points sit on the capacity line: the region
  // was full there. Pins are marked on the floor of the plot.
  const double yfull = draw_capacity ? Y(double(in.capacity_bytes)) : kTop + 4;
  for (size_t c = 0; c < ncol; ++c) {
    const uint8_t m = cols[c].marks;
    if (m & kMarkOverflow) {
      svg.raw("<circle cx=\"" + num(colx(c)) + "\" cy=\"" + num(yfull) + "\" r=\"3.2\" fill=\"" +
              kCapacityColour + "\"/>");
    }
    if (m & kMarkRefused) {
      svg.raw("<circle cx=\"" + num(colx(c)) + "\" cy=\"" + num(yfull) +
              "\" r=\"4\" fill=\"white\" stroke=\"" + kCapacityColour +
              "\" stroke-width=\"1.5\"/>");
    }
    if (m & kMarkPin) {
      const double x = colx(c), y = kTop + kPlotH - 5;
      svg.path("M" + num(x) + "," + num(y - 4) + " L" + num(x + 4) + "," + num(y) + " L" + num(x) +
                   "," + num(y + 4) + " L" + num(x - 4) + "," + num(y) + " Z",
               "fill=\"" + std::string(kPinColour) + "\"");
    }
  }

  // Legend.
  double ly = kTop + 8;
  const double lx = kLeft + kPlotW + 16;
  auto legend_line = [&](const char* colour, const std::string& label, const std::string& dash) {
    svg.line(lx, ly, lx + 22, ly,
             "stroke=\"" + std::string(colour) + "\" stroke-width=\"2\"" +
                 (dash.empty() ? "" : " stroke-dasharray=\"" + dash + "\""));
    svg.text(lx + 28, ly + 4, label, "font-size=\"12\" fill=\"#222\"");
    ly += 20;
  };
  legend_line(kTopColour, reset_rug ? "top (peak per pixel)" : "top (offset)", "");
  legend_line(kLiveColour, "live bytes", "");
  if (any_planned) {
    svg.rect(lx, ly - 6, 22, 11,
             "fill=\"" + std::string(kPlannedColour) + "\" fill-opacity=\"0.55\"");
    svg.text(lx + 28, ly + 4, "planned blocks (live)", "font-size=\"12\" fill=\"#222\"");
    ly += 20;
  }
  if (draw_capacity) legend_line(kCapacityColour, "capacity", "8,4");
  if (r.resets + r.inserted_resets > 0) {
    legend_line(kResetColour, reset_rug ? "resets (ticks)" : "reset", "");
  }
  if (r.boundaries > 0) legend_line(kBoundaryColour, "step boundary", "6,3");
  if (r.overflow_allocs > 0) {
    svg.raw("<circle cx=\"" + num(lx + 11) + "\" cy=\"" + num(ly) + "\" r=\"3.2\" fill=\"" +
            kCapacityColour + "\"/>");
    svg.text(lx + 28, ly + 4, "overflow", "font-size=\"12\" fill=\"#222\"");
    ly += 20;
  }
  if (r.refused > 0) {
    svg.raw("<circle cx=\"" + num(lx + 11) + "\" cy=\"" + num(ly) +
            "\" r=\"4\" fill=\"white\" stroke=\"" + kCapacityColour + "\" stroke-width=\"1.5\"/>");
    svg.text(lx + 28, ly + 4, "refused", "font-size=\"12\" fill=\"#222\"");
    ly += 20;
  }
  bool any_pin = false;
  for (const auto& c : cols) any_pin = any_pin || (c.marks & kMarkPin);
  if (any_pin) {
    svg.path("M" + num(lx + 11) + "," + num(ly - 4) + " l4,4 l-4,4 l-4,-4 Z",
             "fill=\"" + std::string(kPinColour) + "\"");
    svg.text(lx + 28, ly + 4, "pin", "font-size=\"12\" fill=\"#222\"");
    ly += 20;
  }
  if (!legend_tags.empty()) {
    ly += 8;
    svg.text(lx, ly, "live bytes by tag", "font-size=\"12\" font-weight=\"bold\" fill=\"#222\"");
    ly += 14;
    for (const auto& [label, colour] : legend_tags) {
      svg.rect(lx, ly - 9, 22, 11, "fill=\"" + std::string(colour) + "\"");
      svg.text(lx + 28, ly, shorten(label, 22), "font-size=\"12\" fill=\"#222\"");
      ly += 18;
    }
  }
  return svg.finish();
}

}  // namespace zarena_replay
