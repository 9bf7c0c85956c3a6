-- calendar.lua: UTC calendar months in integers, mirror of
-- algorithms/calendar.go (read it for the semantics). A window limit whose
-- refill field is m > 0 (scripts/encode.go: Limit.Calendar) counts in
-- windows of m calendar months; with 0, in windows of period p µs aligned
-- to the epoch. Every quotient here is of integers far below 2^53 (days,
-- months), which divmod computes exactly, negative ones included.

local DAY_US = 86400000000

-- civil_month is the proleptic Gregorian year and month (1-12) of day z
-- since 1970-01-01 (Howard Hinnant's civil_from_days).
local function civil_month(z)
  local era, doe = divmod(z + 719468, 146097)
  local yoe = math.floor((doe - math.floor(doe / 1460) + math.floor(doe / 36524) - math.floor(doe / 146096)) / 365)
  local doy = doe - (365 * yoe + math.floor(yoe / 4) - math.floor(yoe / 100))
  local mp = math.floor((5 * doy + 2) / 153)
  local month, year = mp + 3, yoe + era * 400
  if mp >= 10 then month = mp - 9 end
  if month <= 2 then year = year + 1 end
  return year, month
end

-- days_from_civil is the day since 1970-01-01 of the first of month
-- (1-12) of year (Howard Hinnant's days_from_civil, for day 1).
local function days_from_civil(year, month)
  local mp = month - 3
  if month <= 2 then year, mp = year - 1, month + 9 end
  local era, yoe = divmod(year, 400)
  local doe = yoe * 365 + math.floor(yoe / 4) - math.floor(yoe / 100) + math.floor((153 * mp + 2) / 5)
  return era * 146097 + doe - 719468
end

-- month_index is the number of UTC months from January 1970 to the one
-- holding us; month_start is month i's first µs.
local function month_index(us)
  local days = divmod(us, DAY_US)
  local y, m = civil_month(days)
  return (y - 1970) * 12 + m - 1
end

local function month_start(i)
  local q, r = divmod(i, 12)
  return days_from_civil(1970 + q, r + 1) * DAY_US
end

-- window_at is the window holding now: its start and end (algorithms
-- windowAt); window_after the end of the one starting at start, and
-- window_before the start of the one before it.
local function window_at(p, months, now)
  if months > 0 then
    local i = month_index(now)
    local _, off = divmod(i, months)
    i = i - off
    return month_start(i), month_start(i + months)
  end
  local _, off = divmod(now, p)
  return now - off, now - off + p
end

local function window_after(p, months, start)
  if months > 0 then return month_start(month_index(start) + months) end
  return start + p
end

local function window_before(p, months, start)
  if months > 0 then return month_start(month_index(start) - months) end
  return start - p
end

-- is_window_start reports whether t starts a window; longest_window is the
-- longest a window lasts (µs): p, or months of 31 days.
local function is_window_start(p, months, t)
  local start = window_at(p, months, t)
  return start == t
end

local function longest_window(p, months)
  if months > 0 then return months * 31 * DAY_US end
  return p
end
