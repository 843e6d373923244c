// Prometheus exposition of the service's status. One pure renderer turns the
// status struct (status.h) into the text format (0.0.4) or OpenMetrics 1.0;
// `GET /metrics` renders the service's struct, `ccpool status --prometheus`
// the one read back from the `ccpool status --json` object: the same text.
// Metric names, labels and their meaning: docs/deploy.md#metrics.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "base/histogram.h"
#include "service/status.h"

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

// Renders every metric of `status`. Absent sections are left out (a service
// without a cluster tier has no ccpool_cluster_* series).
std::string render_metrics(const ServiceStatus& status, MetricsFormat format);
// The same, of a status object: render_metrics(status_from_json(status)).
std::string render_metrics(const nlohmann::json& status, MetricsFormat format);

}  // namespace ccpool::service
