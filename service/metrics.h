// Prometheus exposition of the service's status. One pure renderer turns the
// `ccpool status --json` object into the text format (0.0.4) or OpenMetrics
// 1.0, so `GET /metrics` and `ccpool status --prometheus` print the same text.
// Metric names, labels and their meaning: docs/deploy.md#metrics.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "base/histogram.h"

namespace ccpool::service {

enum class MetricsFormat { kPrometheusText, kOpenMetrics };

inline constexpr std::string_view kPrometheusTextType = "text/plain; version=0.0.4; charset=utf-8";
inline constexpr std::string_view kOpenMetricsType =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

// The format a scraper asked for with its Accept header: OpenMetrics only when
// it names application/openmetrics-text (without q=0); text otherwise.
MetricsFormat format_for_accept(std::string_view accept);
std::string_view content_type(MetricsFormat format);

// {"le": [bounds...], "counts": [per bucket, the last one +Inf], "sum_s": S}:
// how status JSON carries a histogram.
nlohmann::json histogram_json(const Histogram::Snapshot& snapshot);

// Renders every metric the status object carries. Keys it does not find are
// left out (a service without a cluster tier has no ccpool_cluster_* series).
std::string render_metrics(const nlohmann::json& status, MetricsFormat format);

}  // namespace ccpool::service
