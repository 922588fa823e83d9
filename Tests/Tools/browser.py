#!/usr/bin/env python3
"""Drives headless Chromium through Gatehouse's hosted pages, as a person on a phone would.

    browser.py confirm URL SHOT_DIR
    browser.py reset URL NEW_PASSWORD SHOT_DIR

Saves a screenshot of every step in SHOT_DIR and prints one JSON line {"ok": true, "screenshots": [...]}.
Any failure prints {"ok": false, "error": "..."} and exits 1. Chromium and chromedriver come from Debian's
packages (CHROMIUM and CHROMEDRIVER override their paths); Selenium never downloads a driver.
"""
import json
import os
import sys

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import WebDriverWait


def start():
    options = Options()
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=412,915"):
        options.add_argument(argument)
    options.binary_location = os.environ.get("CHROMIUM", "/usr/bin/chromium")
    service = Service(os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver"))
    return webdriver.Chrome(service=service, options=options)


def heading(driver, text, timeout=20):
    # While the page after a submit loads, Chromium may answer for a node of the page before it ("Node with given id
    # does not belong to the document", a plain WebDriverException rather than a stale element): keep polling.
    WebDriverWait(driver, timeout, ignored_exceptions=(WebDriverException,)).until(
        EC.text_to_be_present_in_element((By.TAG_NAME, "h1"), text)
    )


def shot(driver, folder, name, taken):
    path = os.path.join(folder, name)
    driver.save_screenshot(path)
    taken.append(path)


def confirm(driver, url, folder, taken):
    driver.get(url)
    heading(driver, "Confirm your email")
    shot(driver, folder, "confirm-1-page.png", taken)
    driver.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    heading(driver, "Your email is confirmed")
    shot(driver, folder, "confirm-2-done.png", taken)


def reset(driver, url, password, folder, taken):
    driver.get(url)
    heading(driver, "Choose a new password")
    # The policy is spelled out next to the field, and the field has a label.
    rule = driver.find_element(By.ID, "password-rule").text
    assert "characters" in rule, rule
    label = driver.find_element(By.CSS_SELECTOR, "label[for=password]").text
    assert label, "the password field has no label"
    shot(driver, folder, "reset-1-form.png", taken)

    # Two different passwords: the server's error shows next to the field.
    driver.find_element(By.ID, "password").send_keys(password)
    driver.find_element(By.ID, "passwordConfirmation").send_keys(password + "x")
    driver.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    WebDriverWait(driver, 20, ignored_exceptions=(WebDriverException,)).until(EC.visibility_of_element_located((By.ID, "password-error")))
    assert driver.find_element(By.ID, "password").get_attribute("aria-invalid") == "true"
    shot(driver, folder, "reset-2-error.png", taken)

    driver.find_element(By.ID, "password").send_keys(password)
    driver.find_element(By.ID, "passwordConfirmation").send_keys(password)
    driver.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    heading(driver, "Your password is changed")
    shot(driver, folder, "reset-3-done.png", taken)


def main():
    if len(sys.argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    mode, url = sys.argv[1], sys.argv[2]
    folder = sys.argv[-1]
    os.makedirs(folder, exist_ok=True)
    taken = []
    driver = start()
    try:
        if mode == "confirm":
            confirm(driver, url, folder, taken)
        elif mode == "reset":
            reset(driver, url, sys.argv[3], folder, taken)
        else:
            raise ValueError("unknown mode " + mode)
        print(json.dumps({"ok": True, "screenshots": taken}))
        return 0
    except Exception as error:  # report, with a screenshot of where it stopped
        try:
            shot(driver, folder, mode + "-failure.png", taken)
        except Exception:
            pass
        print(json.dumps({"ok": False, "error": "%s: %s" % (type(error).__name__, error), "page": driver.page_source[:2000], "screenshots": taken}))
        return 1
    finally:
        driver.quit()


if __name__ == "__main__":
    sys.exit(main())
