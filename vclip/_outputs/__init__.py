"""What vclip writes: safe output names and whole-or-nothing files, images, contact sheets and charts.
(Private.)"""
