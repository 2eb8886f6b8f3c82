#include "verdict_capture.h"

#include <cstring>

#include "zarena/zarena.h"

namespace zarena_replay {

namespace {

const zarena_log_field* find_field(const zarena_log_record* r, const char* key) {
  for (uint32_t i = 0; i < r->field_count; ++i) {
    if (std::strcmp(r->fields[i].key, key) == 0) return &r->fields[i];
  }
  return nullptr;
}

std::string str_field(const zarena_log_record* r, const char* key) {
  const zarena_log_field* f = find_field(r, key);
  return f != nullptr && f->kind == ZARENA_FIELD_STRING && f->s != nullptr ? f->s : "";
}

uint64_t uint_field(const zarena_log_record* r, const char* key) {
  const zarena_log_field* f = find_field(r, key);
  return f != nullptr && f->kind == ZARENA_FIELD_UINT ? static_cast<uint64_t>(f->i) : 0;
}

}  // namespace

VerdictCapture::VerdictCapture() {
  zarena_set_log_callback(&VerdictCapture::on_record, this, ZARENA_LOG_WARN);
}

VerdictCapture::~VerdictCapture() { zarena_set_log_callback(nullptr, nullptr, ZARENA_LOG_INFO); }

void VerdictCapture::on_record(void* self, const zarena_log_record* rec) {
  auto* c = static_cast<VerdictCapture*>(self);
  if (std::strcmp(rec->event, "arena.first_overflow") == 0) {
    Diagnosis d;
    d.event = c->event_;
    d.epoch = c->epoch_;
    d.verdict = str_field(rec, "verdict");
    d.advice = str_field(rec, "advice");
    d.path = str_field(rec, "path");
    d.requested_bytes = uint_field(rec, "requested_bytes");
    d.offset_bytes = uint_field(rec, "offset_bytes");
    c->first_overflows_.push_back(std::move(d));
  } else if (std::strcmp(rec->event, "arena.reset_cadence") == 0 && !c->cadence_warned_) {
    c->cadence_warned_ = true;
    c->cadence_event_ = c->event_;
    c->cadence_message_ = rec->message;
  }
}

}  // namespace zarena_replay
