// Clang thread-safety annotations and the annotated Mutex/MutexLock/CondVar
// that make them checkable (leveldb's port/thread_annotations.h and port.h).
//
// Members a mutex protects are declared GUARDED_BY(m_mutex); functions that
// expect the caller to hold it are REQUIRES(m_mutex). clang with
// -Wthread-safety (scripts/test.sh builds the libraries that way) rejects an
// unguarded access; under gcc every macro expands to nothing.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <shared_mutex>

#if defined(__clang__)
#define CCPOOL_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define CCPOOL_THREAD_ANNOTATION(x)
#endif

#define CAPABILITY(x) CCPOOL_THREAD_ANNOTATION(capability(x))
#define SCOPED_CAPABILITY CCPOOL_THREAD_ANNOTATION(scoped_lockable)
#define GUARDED_BY(x) CCPOOL_THREAD_ANNOTATION(guarded_by(x))
#define PT_GUARDED_BY(x) CCPOOL_THREAD_ANNOTATION(pt_guarded_by(x))
#define ACQUIRED_AFTER(...) CCPOOL_THREAD_ANNOTATION(acquired_after(__VA_ARGS__))
#define ACQUIRED_BEFORE(...) CCPOOL_THREAD_ANNOTATION(acquired_before(__VA_ARGS__))
#define REQUIRES(...) CCPOOL_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define REQUIRES_SHARED(...) CCPOOL_THREAD_ANNOTATION(requires_shared_capability(__VA_ARGS__))
#define ACQUIRE(...) CCPOOL_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define ACQUIRE_SHARED(...) CCPOOL_THREAD_ANNOTATION(acquire_shared_capability(__VA_ARGS__))
#define RELEASE(...) CCPOOL_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define RELEASE_SHARED(...) CCPOOL_THREAD_ANNOTATION(release_shared_capability(__VA_ARGS__))
#define RELEASE_GENERIC(...) CCPOOL_THREAD_ANNOTATION(release_generic_capability(__VA_ARGS__))
#define TRY_ACQUIRE(...) CCPOOL_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
#define EXCLUDES(...) CCPOOL_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define ASSERT_CAPABILITY(x) CCPOOL_THREAD_ANNOTATION(assert_capability(x))
#define RETURN_CAPABILITY(x) CCPOOL_THREAD_ANNOTATION(lock_returned(x))
#define NO_THREAD_SAFETY_ANALYSIS CCPOOL_THREAD_ANNOTATION(no_thread_safety_analysis)

namespace ccpool {

// std::mutex with the capability attributes clang checks.
class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void lock() ACQUIRE() { m_mutex.lock(); }
  void unlock() RELEASE() { m_mutex.unlock(); }
  bool try_lock() TRY_ACQUIRE(true) { return m_mutex.try_lock(); }
  // Tells the analysis the caller holds this mutex (where it cannot see it).
  void assert_held() const ASSERT_CAPABILITY(this) {}

 private:
  friend class CondVar;
  std::mutex m_mutex;
};

// Holds a Mutex for its scope; unlock()/lock() let go of it in between.
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex* mutex) ACQUIRE(mutex) : m_mutex(mutex) { m_mutex->lock(); }
  ~MutexLock() RELEASE() {
    if (m_locked) m_mutex->unlock();
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  void unlock() RELEASE() {
    m_mutex->unlock();
    m_locked = false;
  }
  void lock() ACQUIRE() {
    m_mutex->lock();
    m_locked = true;
  }

 private:
  Mutex* const m_mutex;
  bool m_locked = true;
};

// std::shared_mutex with the capability attributes: exclusive through
// WriterMutexLock, shared through ReaderMutexLock.
class CAPABILITY("mutex") SharedMutex {
 public:
  SharedMutex() = default;
  SharedMutex(const SharedMutex&) = delete;
  SharedMutex& operator=(const SharedMutex&) = delete;

  void lock() ACQUIRE() { m_mutex.lock(); }
  void unlock() RELEASE() { m_mutex.unlock(); }
  void lock_shared() ACQUIRE_SHARED() { m_mutex.lock_shared(); }
  void unlock_shared() RELEASE_SHARED() { m_mutex.unlock_shared(); }

 private:
  std::shared_mutex m_mutex;
};

// Holds a SharedMutex exclusively for its scope.
class SCOPED_CAPABILITY WriterMutexLock {
 public:
  explicit WriterMutexLock(SharedMutex* mutex) ACQUIRE(mutex) : m_mutex(mutex) { m_mutex->lock(); }
  ~WriterMutexLock() RELEASE() { m_mutex->unlock(); }
  WriterMutexLock(const WriterMutexLock&) = delete;
  WriterMutexLock& operator=(const WriterMutexLock&) = delete;

 private:
  SharedMutex* const m_mutex;
};

// Holds a SharedMutex shared for its scope; unlock() lets go of it early.
class SCOPED_CAPABILITY ReaderMutexLock {
 public:
  explicit ReaderMutexLock(SharedMutex* mutex) ACQUIRE_SHARED(mutex) : m_mutex(mutex) {
    m_mutex->lock_shared();
  }
  ~ReaderMutexLock() RELEASE() {
    if (m_locked) m_mutex->unlock_shared();
  }
  ReaderMutexLock(const ReaderMutexLock&) = delete;
  ReaderMutexLock& operator=(const ReaderMutexLock&) = delete;

  void unlock() RELEASE() {
    m_mutex->unlock_shared();
    m_locked = false;
  }

 private:
  SharedMutex* const m_mutex;
  bool m_locked = true;
};

// A condition variable bound to one Mutex; the caller of wait() holds it (the
// analysis cannot name the bound mutex from here, as in leveldb). Use
// `while (!condition) cv.wait();` so the analysis sees the guarded reads.
class CondVar {
 public:
  explicit CondVar(Mutex* mutex) : m_mutex(mutex) {}
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  void wait() {
    std::unique_lock<std::mutex> lock(m_mutex->m_mutex, std::adopt_lock);
    m_cv.wait(lock);
    lock.release();
  }
  // false when the deadline passed (spurious wakeups return true).
  template <typename Clock, typename Duration>
  bool wait_until(const std::chrono::time_point<Clock, Duration>& deadline) {
    std::unique_lock<std::mutex> lock(m_mutex->m_mutex, std::adopt_lock);
    bool woke = m_cv.wait_until(lock, deadline) == std::cv_status::no_timeout;
    lock.release();
    return woke;
  }
  void signal() { m_cv.notify_one(); }
  void signal_all() { m_cv.notify_all(); }

 private:
  Mutex* const m_mutex;
  std::condition_variable m_cv;
};

}  // namespace ccpool
